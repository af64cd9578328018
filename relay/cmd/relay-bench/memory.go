package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/relay/outbox"
)

// relayRSSBudget is the resident-set budget of one relay process.
const relayRSSBudget = 128 << 20

// processMemory drains the backlog with the relay binary run as a process
// of its own, in each mode with the linger the in-process runs had, and
// reports its peak resident set. The runs above are in process, where the
// bench's own memory (every row it prepared) would hide the relay's; this
// one measures nothing else.
func processMemory(ctx context.Context, kcfg kit.KafkaConfig, dbURL string, pool *pgxpool.Pool,
	backlog func() ([]outbox.Record, error), batch, workers int, modes []string, linger map[string]time.Duration) error {
	if len(modes) == 0 {
		return nil
	}
	rows, err := backlog()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "relay-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "relay")
	// By import path, so the bench runs from anywhere in the workspace.
	if err := proc.GoBuild(".", bin, "github.com/concordhq/concord/relay/cmd/relay"); err != nil {
		return err
	}
	for _, mode := range modes {
		peak, took, err := relayProcessDrain(ctx, bin, dir, mode, kcfg, dbURL, pool, rows, batch, workers, linger[mode])
		if err != nil {
			return fmt.Errorf("relay process, --mode %s: %w", mode, err)
		}
		over := ""
		if peak > relayRSSBudget {
			over = "  OVER budget"
		}
		fmt.Printf("  relay process    --mode %-4s %d events drained in %s: peak RSS %.0f MiB (budget %d MiB)%s\n",
			mode, len(rows), took.Round(time.Millisecond), float64(peak)/(1<<20), relayRSSBudget>>20, over)
	}
	return nil
}

// relayProcessDrain starts the relay, waits until it is ready, loads the
// backlog and waits until every row is published; it returns the
// process's peak resident set over the whole run and the drain's length
// (start-up excluded).
func relayProcessDrain(ctx context.Context, bin, dir, mode string, kcfg kit.KafkaConfig, dbURL string, pool *pgxpool.Pool,
	rows []outbox.Record, batch, workers int, linger time.Duration) (int64, time.Duration, error) {
	if _, err := pool.Exec(ctx, "truncate outbox"); err != nil {
		return 0, 0, err
	}
	ports, err := kit.FreePorts(1)
	if err != nil {
		return 0, 0, err
	}
	slot := "relay_bench_proc_" + mode
	p, err := proc.Run(proc.Command{Name: "relay", Path: bin, Log: filepath.Join(dir, "relay-"+mode+".log"), Env: kcfg.Env(),
		Args: []string{"--database-url", dbURL, "--mode", mode, "--slot", slot, "--publication", slot,
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", ports[0]),
			"--batch-size", fmt.Sprint(batch), "--workers", fmt.Sprint(workers), "--linger", linger.String(), "--retention", "-1s"}})
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		_ = p.Stop(syscall.SIGTERM, 20*time.Second)
		if mode == "wal" {
			dropSlot(pool, slot)
		}
	}()
	if err := p.WaitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[0]), 2*time.Minute); err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if err := appendBacklog(ctx, pool, rows); err != nil {
		return 0, 0, err
	}
	err = p.WaitFor(ctx, 5*time.Minute, "done with the backlog", func(ctx context.Context) error {
		var left int
		if err := pool.QueryRow(ctx, `select count(*) from outbox where published_at is null and skipped_at is null`).Scan(&left); err != nil {
			return err
		}
		if left > 0 {
			return fmt.Errorf("%d rows unpublished", left)
		}
		return nil
	})
	took := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("%w\n%s", err, strings.TrimSpace(p.LogTail(2000)))
	}
	u, err := proc.ReadUsage(p.PID())
	return u.PeakRSS, took, err
}
