package console

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/concordhq/concord/consumers/replay"
)

// DeadLetterRow is one dead_letters row with a readable preview of its bytes.
type DeadLetterRow struct {
	ID         int64
	Group      string
	Topic      string
	Partition  int32
	Offset     int64
	EventID    string
	EventType  string
	Reason     string
	Error      string
	FailedAt   time.Time
	ReplayedAt *time.Time
	Preview    string
}

// DeadLetterGroup is one consumer group's dead letters in one service's database.
type DeadLetterGroup struct {
	Service string
	Group   string
	Pending int
	Rows    []DeadLetterRow
}

func (s *Server) deadLettersPage(r *http.Request) (any, error) {
	svcs := s.services()
	per := make([][]DeadLetterGroup, len(svcs))
	g, ctx := errgroup.WithContext(r.Context())
	for i, sv := range svcs {
		g.Go(func() error {
			rows, err := sv.Pool.Query(ctx, `select id, consumer_group, topic, partition, "offset", coalesce(event_id, ''),
					coalesce(event_type, ''), reason, error, failed_at, replayed_at, coalesce(record_value, ''::bytea)
				from dead_letters order by (replayed_at is null) desc, id desc limit 200`)
			if err != nil {
				return fmt.Errorf("%s: dead letters: %w", sv.Name, err)
			}
			byGroup := map[string]int{}
			var d DeadLetterRow
			var value []byte
			_, err = pgx.ForEachRow(rows, []any{&d.ID, &d.Group, &d.Topic, &d.Partition, &d.Offset, &d.EventID, &d.EventType,
				&d.Reason, &d.Error, &d.FailedAt, &d.ReplayedAt, &value}, func() error {
				d.Preview = PayloadPreview(value)
				j, ok := byGroup[d.Group]
				if !ok {
					j = len(per[i])
					byGroup[d.Group] = j
					per[i] = append(per[i], DeadLetterGroup{Service: sv.Name, Group: d.Group})
				}
				if d.ReplayedAt == nil {
					per[i][j].Pending++
				}
				per[i][j].Rows = append(per[i][j].Rows, d)
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s: dead letters: %w", sv.Name, err)
			}
			return nil
		})
	}
	err := g.Wait()
	var out []DeadLetterGroup
	for _, gs := range per {
		out = append(out, gs...)
	}
	return out, err
}

// PayloadPreview shows a record value the way an operator can read it:
// indented JSON, a Confluent-framed Avro header, text, or hex.
func PayloadPreview(v []byte) string {
	const max = 1500
	cut := func(s string) string {
		if len(s) > max {
			return s[:max] + "\n… (" + strconv.Itoa(len(s)-max) + " more characters)"
		}
		return s
	}
	switch {
	case len(v) == 0:
		return "(empty value)"
	case json.Valid(v):
		var b bytes.Buffer
		if err := json.Indent(&b, v, "", "  "); err == nil {
			return cut(b.String())
		}
	case v[0] == 0 && len(v) >= 5:
		n := 32
		if len(v)-5 < n {
			n = len(v) - 5
		}
		return fmt.Sprintf("Avro (Confluent framing), schema id %d, %d bytes of data; first bytes: %s",
			binary.BigEndian.Uint32(v[1:5]), len(v)-5, hex.EncodeToString(v[5:5+n]))
	case utf8.Valid(v):
		return cut("not JSON: " + strconv.Quote(string(v)))
	}
	n := len(v)
	if n > 64 {
		n = 64
	}
	return fmt.Sprintf("%d bytes, not text; first bytes: %s", len(v), hex.EncodeToString(v[:n]))
}

// deadLetterReplay is `replay dlq --group G [--id N] --execute`.
func (s *Server) deadLetterReplay(r *http.Request, _ string) (AuditEntry, string, error) {
	sv, err := s.service(r.PathValue("service"))
	if err != nil {
		return AuditEntry{}, "", err
	}
	group := strings.TrimSpace(r.PostForm.Get("group"))
	if group == "" {
		return AuditEntry{}, "", badRequest("group: the consumer group whose dead letters to replay is required")
	}
	var ids []int64
	target := "all"
	if v := strings.TrimSpace(r.PostForm.Get("id")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return AuditEntry{}, "", badRequest("id: %q is not a dead letter id", v)
		}
		ids, target = []int64{n}, v
	}
	if s.cfg.Producer == nil {
		return AuditEntry{}, "", pageError{http.StatusServiceUnavailable, "the console has no Kafka producer: start it with --kafka-brokers"}
	}
	ctx := r.Context()
	// Two operators replaying the same group at once would both read the
	// same pending rows and publish them twice: one replay per group at a
	// time, and the second is told so.
	conn, err := sv.Pool.Acquire(ctx)
	if err != nil {
		return AuditEntry{}, "", err
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `select pg_try_advisory_lock(hashtext('concord_console_dlq'), hashtext($1))`, group).Scan(&locked); err != nil {
		return AuditEntry{}, "", err
	}
	if !locked {
		return AuditEntry{}, "", conflict("another operator is replaying the dead letters of %s group %s right now; nothing was changed", sv.Name, group)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `select pg_advisory_unlock(hashtext('concord_console_dlq'), hashtext($1))`, group)
	}()
	dls, err := replay.PendingDeadLetters(ctx, sv.Pool, group, ids)
	if err != nil {
		return AuditEntry{}, "", err
	}
	if len(dls) == 0 {
		if len(ids) == 0 {
			return AuditEntry{}, "", conflict("%s group %s has no dead letters waiting to be replayed (another operator may have replayed them); nothing was changed", sv.Name, group)
		}
		var replayed *time.Time
		err := sv.Pool.QueryRow(ctx, `select replayed_at from dead_letters where id = $1 and consumer_group = $2`, ids[0], group).Scan(&replayed)
		if errors.Is(err, pgx.ErrNoRows) {
			return AuditEntry{}, "", notFound("%s group %s has no dead letter %d; nothing was changed", sv.Name, group, ids[0])
		}
		if err != nil {
			return AuditEntry{}, "", err
		}
		return AuditEntry{}, "", conflict("%s dead letter %d was already replayed at %s (by another operator?); nothing was changed",
			sv.Name, ids[0], fmtTimePtr(replayed))
	}
	if err := replay.Republish(ctx, s.cfg.Producer, sv.Pool, dls); err != nil {
		return AuditEntry{}, "", err
	}
	done := make([]string, len(dls))
	for i, d := range dls {
		done[i] = strconv.FormatInt(d.ID, 10)
	}
	return AuditEntry{Service: sv.Name, Target: group + ": " + strings.Join(done, ","), Reason: strings.TrimSpace(r.PostForm.Get("reason")),
			Outcome: fmt.Sprintf("re-published %d", len(dls))},
		fmt.Sprintf("re-published %d dead letter(s) of %s group %s to their original topics (%s)", len(dls), sv.Name, group, target), nil
}
