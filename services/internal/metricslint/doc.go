// Package metricslint holds the test that starts every binary of the
// repository that serves /metrics, as operators run it, and lints what it
// exports with promlint. Binaries are discovered, not listed: a new one
// that serves /metrics without a way to start it here fails the test.
//
// Its other tests hold deploy/prometheus's alert rules and deploy/grafana's
// dashboards to what those binaries export: every series and label matcher
// an expression names must belong to a family some binary exports.
package metricslint
