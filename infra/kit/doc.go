// Package kit is the plumbing every Concord binary shares: configuration
// from flags with environment fallbacks, slog logging, the franz-go client,
// the pgx pool, the operations HTTP server (/metrics, /healthz, /readyz) and
// graceful shutdown on SIGTERM. It holds no business logic.
package kit
