package testkit

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresURL is the admin URL of the shared test server.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("CONCORD_POSTGRES_URL")
	if u == "" {
		t.Fatal("CONCORD_POSTGRES_URL is not set: integration tests need PostgreSQL (run `make test`, which starts the local stack, or export the URL of a server you own)")
	}
	return u
}

// NewDatabase creates a fresh, empty database on the server at adminURL and
// drops it (forcing out leftover sessions) when the test ends. It returns the
// new database's URL.
func NewDatabase(t testing.TB, adminURL string) string {
	t.Helper()
	name := UniqueName(t, "t")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatalf("connect %s: %v", adminURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Logf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// NewPool creates a fresh database on the shared server and returns a pool
// on it; both go away when the test ends. The migrations (a component's
// Migrate functions, e.g. the outbox's and then its own) run first, in
// order.
func NewPool(t testing.TB, migrations ...func(context.Context, *pgxpool.Pool) error) *pgxpool.Pool {
	t.Helper()
	pool := Pool(t, NewDatabase(t, PostgresURL(t)))
	for _, m := range migrations {
		if err := m(context.Background(), pool); err != nil {
			t.Fatalf("migrate: %v", err)
		}
	}
	return pool
}

// Pool opens a pool on url, closed when the test ends.
func Pool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(ctx); err != nil {
		t.Fatal(fmt.Errorf("ping %s: %w", url, err))
	}
	t.Cleanup(pool.Close)
	return pool
}
