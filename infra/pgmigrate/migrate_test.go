package pgmigrate_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/concordhq/concord/infra/pgmigrate"
	"github.com/concordhq/concord/infra/testkit"
)

func TestApplyIsIdempotentAndSafeConcurrently(t *testing.T) {
	pool := testkit.NewPool(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pgmigrate.Apply(ctx, pool, "widgets_schema_version", os.DirFS("testdata/m"))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "insert into widgets (name, colour) values ('a', 'red')"); err != nil {
		t.Fatalf("migrations not applied: %v", err)
	}
	var v int
	if err := pool.QueryRow(ctx, "select version from widgets_schema_version").Scan(&v); err != nil || v != 2 {
		t.Fatalf("version %d err %v, want 2", v, err)
	}
}
