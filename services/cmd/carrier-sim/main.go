// Command carrier-sim runs the parcel carrier simulator with its fault
// knobs. See services/shipping/carriersim and the README's shipping-svc
// section.
package main

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/shipping/carriersim"
)

func main() { kit.Main("carrier-sim", run) }

func run(ctx context.Context, args []string) error {
	fs := kit.NewFlagSet("carrier-sim", "carrier-sim: a parcel carrier's label API (create, cancel, get, list by idempotency key) that misbehaves on purpose.")
	addr := fs.String("http-addr", "CARRIERSIM_ADDR", "127.0.0.1:12112", "listen address (API, /healthz, /readyz, /metrics, /__admin/)")
	fs.Alias("addr", "http-addr")
	apiKey := fs.String("api-key", "CARRIERSIM_API_KEY", "", "bearer token every API request must carry; empty accepts any caller")
	seed := fs.Int("seed", "CARRIERSIM_SEED", 1, "seed for every random decision (ids and faults): same seed, same requests, same run")
	admin := fs.Bool("admin", "CARRIERSIM_ADMIN", false, "enable the unauthenticated /__admin/ API (faults, ship, stats)")
	grace := fs.Duration("shutdown-grace", "CARRIERSIM_SHUTDOWN_GRACE", 5*time.Second, "how long in-flight requests may finish on SIGTERM")
	logFlags := kit.AddLogFlags(fs)
	defaults := carriersim.DefaultFaults()
	knobs := map[string]*string{}
	for _, k := range carriersim.Knobs() {
		env := "CARRIERSIM_FAULT_" + strings.ToUpper(strings.ReplaceAll(k.Name, "-", "_"))
		knobs[k.Name] = fs.String("fault-"+k.Name, env, k.Get(&defaults), "fault: "+k.Usage)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	faults := defaults
	values := map[string]string{}
	for name, v := range knobs {
		values[name] = *v
	}
	if err := faults.Apply(values); err != nil {
		return kit.Usagef("--fault-%v", err)
	}
	if *seed < 0 {
		return kit.Usagef("--seed %d: must not be negative", *seed)
	}
	log, stopTracing, err := logFlags.Start(ctx, os.Stderr, "carrier-sim")
	if err != nil {
		return err
	}
	defer stopTracing()
	sim, err := carriersim.New(carriersim.Config{APIKey: *apiKey, Seed: uint64(*seed), Faults: faults, Admin: *admin, Logger: log})
	if err != nil {
		return err
	}
	ops, err := kit.NewOpsServer(*addr)
	if err != nil {
		return err
	}
	ops.Mux.Handle("/", sim)
	log.Info("carrier-sim ready", "addr", ops.Addr(), "seed", *seed, "admin", *admin, "faults", faults.Values())
	stop := context.AfterFunc(ctx, sim.Drain) // withheld answers must not hold up shutdown
	defer stop()
	return ops.Run(ctx, log, *grace)
}
