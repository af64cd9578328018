package idempotent_test

import (
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
)

func errStats(s idempotent.Stats) error { return fmt.Errorf("stats %+v", s) }

type errString string

func (e errString) Error() string { return string(e) }

func errCount(n int) error { return fmt.Errorf("got %d", n) }

type pgxTx = pgx.Tx

func headers(r *kgo.Record) map[string]string {
	m := map[string]string{}
	for _, h := range r.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}
