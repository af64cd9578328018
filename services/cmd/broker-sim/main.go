// Command broker-sim runs the Alpaca Broker API simulator with its fault
// knobs. See services/brokersim/README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/brokersim"
)

func main() { kit.Main("broker-sim", run) }

func run(ctx context.Context, args []string) error {
	fs := kit.NewFlagSet("broker-sim", "broker-sim: a subset of Alpaca's Broker API (accounts, cash journals, ACH and wire transfers, funding-wallet transfers, SSE event streams) that misbehaves on purpose.")
	addr := fs.String("http-addr", "", "127.0.0.1:12112", "listen address (API, /healthz, /readyz, /metrics, /__admin/)")
	apiKey := fs.String("api-key", "", "", "the only HTTP Basic key id accepted (with --api-secret); empty accepts any")
	apiSecret := fs.String("api-secret", "", "", "the secret that goes with --api-key")
	seed := fs.Int("seed", "", 1, "seed for every random decision (ids, ULIDs, faults): same seed, same requests, same run")
	dataDir := fs.String("data-dir", "", "", "directory for the state snapshot (state.json); empty keeps state in memory only")
	snapEvery := fs.Duration("snapshot-interval", "", 200*time.Millisecond, "how often changes no answer waits for (scheduled settlements) are written to --data-dir; every answer and SSE message waits for the state it shows to be written")
	rateLimit := fs.Int("rate-limit", "", brokersim.DefaultRateLimit, "requests per --rate-window for the whole correspondent before 429; 0 disables (and drops the X-RateLimit headers)")
	rateWindow := fs.Duration("rate-window", "", time.Minute, "length of a rate-limit window (X-RateLimit-Reset is its end)")
	settle := fs.Duration("settlement-delay", "", 2*time.Second, "time per settlement step of a transfer (QUEUED → SENT_TO_CLEARING → COMPLETE) and a funding-wallet transfer")
	firm := fs.String("firm-account-id", "", "", "the firm account's id on a fresh start (default: drawn from --seed)")
	firmCash := fs.String("firm-cash", "", "10000000.00", "the firm account's opening cash, USD")
	corr := fs.String("correspondent", "", "CNCD", "correspondent code stamped on funding events")
	buffer := fs.Int("sse-buffer", "", 1000, "messages a live SSE reader may fall behind before the oldest are dropped")
	heartbeat := fs.Duration("sse-heartbeat", "", 15*time.Second, "interval of :heartbeat comments on idle SSE streams")
	admin := fs.Bool("admin", "", false, "enable the unauthenticated /__admin/ API (faults, corrections, returns, stats)")
	grace := fs.Duration("shutdown-grace", "", 5*time.Second, "how long in-flight requests may finish on SIGTERM")
	logFlags := kit.AddLogFlags(fs)
	defaults := brokersim.DefaultFaults()
	knobs := map[string]*string{}
	for _, k := range brokersim.Knobs() {
		knobs[k.Name] = fs.String("fault-"+k.Name, "", k.Get(&defaults), "fault: "+k.Usage)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return kit.Usagef("unexpected argument %q", fs.Arg(0))
	}
	faults := defaults
	values := map[string]string{}
	for name, v := range knobs {
		values[name] = *v
	}
	if err := faults.Apply(values); err != nil {
		return kit.Usagef("--fault-%v", err)
	}
	cash, err := brokersim.ParseAmount(*firmCash)
	switch {
	case err != nil:
		return kit.Usagef("--firm-cash: %v", err)
	case *seed < 0:
		return kit.Usagef("--seed %d: must not be negative", *seed)
	case *rateLimit < 0:
		return kit.Usagef("--rate-limit %d: must not be negative", *rateLimit)
	case *buffer < 1:
		return kit.Usagef("--sse-buffer %d: must be at least 1", *buffer)
	case *snapEvery <= 0 || *rateWindow <= 0 || *settle <= 0 || *heartbeat <= 0:
		return kit.Usagef("--snapshot-interval, --rate-window, --settlement-delay and --sse-heartbeat must be positive")
	case (*apiKey == "") != (*apiSecret == ""):
		return kit.Usagef("--api-key and --api-secret go together")
	case *firm != "" && !isUUID(*firm):
		return kit.Usagef("--firm-account-id %q: want a UUID", *firm)
	}
	limit := *rateLimit
	if limit == 0 {
		limit = -1 // the package's 0 means "default"
	}
	log, stopTracing, err := logFlags.Start(ctx, os.Stderr, "broker-sim")
	if err != nil {
		return err
	}
	defer stopTracing()
	sim, err := brokersim.New(brokersim.Config{
		APIKey: *apiKey, APISecret: *apiSecret, Seed: uint64(*seed), Faults: faults, RateLimit: limit, RateWindow: *rateWindow,
		SettlementDelay: *settle, FirmAccountID: *firm, FirmCash: cash, Correspondent: *corr, DataDir: *dataDir,
		SnapshotInterval: *snapEvery, SSEBuffer: *buffer, Heartbeat: *heartbeat, Admin: *admin, Logger: log,
	})
	if err != nil {
		return err
	}
	ops, err := kit.NewOpsServer(*addr)
	if err != nil {
		_ = sim.Close()
		return err
	}
	if err := ops.Registry.Register(sim.Metrics()); err != nil {
		_ = sim.Close()
		return err
	}
	ops.Mux.Handle("/", sim)
	log.Info("broker-sim ready", "addr", ops.Addr(), "seed", *seed, "data_dir", *dataDir, "admin", *admin,
		"firm_account", sim.FirmAccountID(), "faults", faults.Values())
	// Open SSE streams end when the simulator closes, so shutdown does not
	// wait for them.
	stop := context.AfterFunc(ctx, func() { _ = sim.Close() })
	defer stop()
	runErr := ops.Run(ctx, log, *grace)
	if err := sim.Close(); err != nil {
		return fmt.Errorf("final snapshot: %w", err)
	}
	return runErr
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range strings.ToLower(s) {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if r != '-' {
				return false
			}
		case !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f'):
			return false
		}
	}
	return true
}
