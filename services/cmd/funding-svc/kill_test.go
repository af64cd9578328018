package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/services/brokersim"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingstore"
	"github.com/concordhq/concord/services/funding/fundingtest"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "funding-svc-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "funding-svc")
	if err := proc.GoBuild(".", binary, "."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// funding-svc is killed with SIGKILL while journals keep executing at the
// broker; restarted, it reads on from its persisted cursors: every
// journal is credited, none twice, and the projection equals the
// broker's cash.
func TestAKilledServiceResumesFromItsCursorsMissingNothingApplyingNothingTwice(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 43})
	dbURL := testkit.NewDatabase(t, testkit.PostgresURL(t))
	accounts := []string{rail.Account(), rail.Account()}
	addr, ops := freeAddr(t), freeAddr(t)
	p := proc.Start(t, proc.Command{Name: "funding-svc", Path: binary, Log: filepath.Join(t.TempDir(), "funding-svc.log"),
		Args: []string{"--database-url", dbURL, "--broker-url", rail.HTTP.URL, "--broker-key-id", "CK_TEST", "--broker-secret", "secret",
			"--firm-account", rail.Firm, "--http-addr", addr, "--ops-addr", ops, "--relay=false", "--create-topics=false"}})
	if err := p.WaitReady(context.Background(), "http://"+ops+"/healthz", 60*time.Second); err != nil {
		t.Fatal(err)
	}

	const n = 30
	c := rail.Client(5 * time.Second)
	var wg sync.WaitGroup
	wg.Add(1)
	errs := make(chan error, 1)
	go func() {
		defer wg.Done()
		for i := range n {
			if _, err := c.CreateJournal(context.Background(), fundingbroker.JournalRequest{FromAccount: rail.Firm, ToAccount: accounts[i%2],
				Amount: int64(100 + i), Description: fmt.Sprintf("j-%d", i)}, fmt.Sprintf("k-%d", i)); err != nil {
				errs <- err
				return
			}
		}
	}()
	// The service's own database, migrated by the service.
	svcDB := &fundingtest.Rail{T: t, Pool: testkit.Pool(t, dbURL)}
	svcDB.Store = &fundingstore.Store{Pool: svcDB.Pool}
	credited := func() int { return svcDB.Count(`select count(*) from outbox where event_type = 'account.credited'`) }
	fundingtest.Eventually(t, 30*time.Second, "some journals credited", func() (bool, string) {
		k := credited()
		return k > 0, fmt.Sprintf("%d credited", k)
	})
	p.Kill()
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	before := credited()
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	fundingtest.Eventually(t, 30*time.Second, "every journal credited once", func() (bool, string) {
		k := credited()
		for _, a := range accounts {
			if got, cash := svcDB.Balance(a), rail.BrokerCash(a); got != cash {
				return false, fmt.Sprintf("%d credited; account %s: projected %d, broker %d", k, a, got, cash)
			}
		}
		return k == n, fmt.Sprintf("%d credited, want %d", k, n)
	})
	t.Logf("%d of %d journals credited before the kill", before, n)
}
