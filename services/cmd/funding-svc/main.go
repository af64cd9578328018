// Command funding-svc moves customers' money through a broker (Alpaca's
// Broker API, or broker-sim): deposits and withdrawals by cash journal and
// by ACH transfer, mirrored from the broker's journal and funding status
// streams (each read from its persisted cursor) and from polls of the
// funding-wallet transfers that send no events; it applies the
// reconciler's repair commands (funding-commands) through the same
// status-guarded writer. Every movement's entries publish
// account.* events through the outbox, keyed by account id; the balances
// per account are their projection, built by this service's consumer of
// account-events (fundingprojection) in a table of its own.
package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/funding/fundingapi"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingjournal"
	"github.com/concordhq/concord/services/funding/fundingpoll"
	"github.com/concordhq/concord/services/funding/fundingprojection"
	"github.com/concordhq/concord/services/funding/fundingstore"
	"github.com/concordhq/concord/services/funding/fundingstream"
	"github.com/concordhq/concord/services/funding/fundingtransfer"
	"github.com/concordhq/concord/services/internal/svc"
	"github.com/concordhq/concord/services/reconciler/fundingrepair"
	"github.com/concordhq/concord/services/reconciler/reconcilerfunding"
)

func main() { kit.Main("funding-svc", run) }

func run(ctx context.Context, args []string) error {
	var brokerURL, keyID, secret, firm *string
	var timeout, rewind, pollEvery, completedWindow, resumeEvery *time.Duration
	var mux idempotent.Mux
	return svc.Run(ctx, args, svc.Spec{
		Name: "funding-svc", Summary: "Concord funding service: the broker rail's deposits, withdrawals and account events.",
		DatabaseEnv: "", DefaultAddr: ":8087", DefaultOpsAddr: ":9087",
		ProducedTopics: []string{contract.TypeAccountCredited.Topic()},
		// The reconciler's repair commands, appended to this database's
		// outbox and published by this service's relay (their handler is
		// registered in Setup, which has the store), and the service's own
		// account.* events, which the projection applies. One group: the
		// grants give each service one.
		Topics:       []string{fundingrepair.Topic, fundingprojection.Topic},
		Types:        append(slices.Clone(fundingrepair.Types), fundingprojection.Types...),
		BatchHandler: fundingrepair.BatchHandler(&mux),
		Migrate:      migrate,
		Flags: func(fs *kit.FlagSet) {
			brokerURL = fs.String("broker-url", "", "", "broker API base URL (broker-sim: http://127.0.0.1:12112)")
			keyID = fs.String("broker-key-id", "", "", "broker API key id (HTTP Basic user)")
			secret = fs.String("broker-secret", "", "", "broker API secret (HTTP Basic password)")
			firm = fs.String("firm-account", "", "", "the firm's account at the broker, the other side of every journal")
			timeout = fs.Duration("broker-timeout", "", 10*time.Second, "how long a broker call may take; after it the outcome is unknown and is looked up before any retry")
			rewind = fs.Duration("stream-rewind", "", time.Minute,
				"how far before its cursor a stream is re-read on reconnect (the broker orders events per account only; what was taken is dropped by the seen set)")
			pollEvery = fs.Duration("poll-interval", "", time.Minute,
				"one round of funding-wallet transfer polls, its calls spread across it: a wallet transfer's change shows within about this long")
			completedWindow = fs.Duration("completed-window", "", time.Hour, "how long a completed wallet transfer is still polled")
			resumeEvery = fs.Duration("resume-interval", "", 30*time.Second, "how often journals whose broker answer was lost are looked up and finished")
		},
		CheckFlags: func() error {
			if err := kit.Require("broker-url", *brokerURL); err != nil {
				return err
			}
			return kit.Require("firm-account", *firm)
		},
		Setup: func(ctx context.Context, env *svc.Env) ([]func(context.Context) error, error) {
			if err := fundingstore.RegisterMetrics(env.Ops.Registry); err != nil {
				return nil, err
			}
			store := &fundingstore.Store{Pool: env.Pool, Outbox: env.Outbox}
			fundingrepair.Register(&mux, store)
			fundingprojection.Register(&mux)
			calls := &fundingbroker.Client{BaseURL: *brokerURL, KeyID: *keyID, Secret: *secret, HTTP: &http.Client{Timeout: *timeout}}
			// Streams stay open for hours: no client timeout, ctx ends them.
			streams := &fundingbroker.Client{BaseURL: *brokerURL, KeyID: *keyID, Secret: *secret, HTTP: &http.Client{}}
			writer := &fundingjournal.Writer{Store: store, Broker: calls, FirmAccount: *firm}
			transfers := &fundingtransfer.Writer{Store: store, Broker: calls}
			(&fundingapi.Handler{Store: store, Writer: writer, Transfers: transfers, Projection: true, Log: env.Log}).Register(env.API)
			workers := []func(context.Context) error{
				(&fundingpoll.Poller{Store: store, Broker: calls, Interval: *pollEvery, CompletedWindow: *completedWindow}).Run,
				func(ctx context.Context) error { return every(ctx, *resumeEvery, writer.Resume, env) },
			}
			for _, k := range []fundingstream.Kind{fundingstream.Journals, fundingstream.Funding, fundingstream.Activities} {
				c := &fundingstream.Consumer{Kind: k, Store: store, Broker: streams, FirmAccount: *firm, Rewind: *rewind, Logger: env.Log}
				workers = append(workers, c.Run)
			}
			return workers, nil
		},
	})
}

// migrate applies the funding schema, then the reconciler's tables (the
// repair handler resolves findings, and those reference movements), then
// the projection's.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	for _, m := range []func(context.Context, *pgxpool.Pool) error{fundingstore.Migrate, reconcilerfunding.Migrate, fundingprojection.Migrate} {
		if err := m(ctx, pool); err != nil {
			return err
		}
	}
	return nil
}

// every runs f at start and then every d until ctx ends; a failed run is
// logged and tried again at the next tick.
func every(ctx context.Context, d time.Duration, f func(context.Context) error, env *svc.Env) error {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
			env.Log.Warn("resume unanswered journals", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
