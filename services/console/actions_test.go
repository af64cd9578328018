package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/services/console"
)

func wantStatus(t *testing.T, what string, code int, body string, want int, contains string) {
	t.Helper()
	if code != want || !strings.Contains(body, contains) {
		t.Fatalf("%s: %d, body %q; want %d containing %q", what, code, excerpt(body), want, contains)
	}
}

// excerpt is the page's message, or its start.
func excerpt(body string) string {
	if i := strings.Index(body, `id="error"`); i >= 0 {
		end := strings.Index(body[i:], "</p>")
		if end > 0 {
			return body[i : i+end]
		}
	}
	if len(body) > 300 {
		return body[:300]
	}
	return body
}

func wantAudit(t *testing.T, es []console.AuditEntry, n int, action, actor, target, reason string) {
	t.Helper()
	if len(es) != n {
		t.Fatalf("audit has %d rows; want %d: %+v", len(es), n, es)
	}
	e := es[0]
	if e.Action != action || e.Actor != actor || !strings.Contains(e.Target, target) || e.Reason != reason || time.Since(e.At) > time.Minute {
		t.Fatalf("audit row %+v; want %s by %s on %s because %q, just now", e, action, actor, target, reason)
	}
}

func TestRetryReleasesAParkedRowOnceAndAuditsIt(t *testing.T) {
	e := newEnv(t)
	id, _ := e.parkedRow(e.orders)
	op := e.login("op")
	code, body := op.post(fmt.Sprintf("/outbox/order-svc/%d/retry", id), url.Values{"back": {"/outbox"}})
	wantStatus(t, "retry", code, body, http.StatusSeeOther, "")
	if n := e.count(e.orders, `select count(*) from outbox where id = $1 and parked_at is null and attempts = 0 and published_at is null`, id); n != 1 {
		t.Fatal("the row is still parked after retry")
	}
	wantAudit(t, e.audit(), 1, console.ActionOutboxRetry, "op", fmt.Sprint(id), "")
	if n := e.actions(console.ActionOutboxRetry, "done"); n != 1 {
		t.Fatalf("concord_console_actions_total{outbox.retry, done} = %d; want 1", n)
	}

	// Another operator's retry of the same row: it is not parked any more.
	code, body = e.login("op2").post(fmt.Sprintf("/outbox/order-svc/%d/retry", id), nil)
	wantStatus(t, "second retry", code, body, http.StatusConflict, "is not parked any more")
	if len(e.audit()) != 1 {
		t.Fatal("a refused retry was audited as done")
	}
	code, body = op.post("/outbox/order-svc/987654/retry", nil)
	wantStatus(t, "unknown row", code, body, http.StatusNotFound, "has no outbox row 987654")
}

func TestSkipNeedsAReasonAndKeepsItWithTheRow(t *testing.T) {
	e := newEnv(t)
	id, _ := e.parkedRow(e.orders)
	op := e.login("op")
	path := fmt.Sprintf("/outbox/order-svc/%d/skip", id)
	code, body := op.post(path, url.Values{"reason": {"   "}})
	wantStatus(t, "skip without a reason", code, body, http.StatusBadRequest, "reason: say why")
	if n := e.count(e.orders, `select count(*) from outbox where id = $1 and parked_at is not null and skipped_at is null`, id); n != 1 {
		t.Fatal("a refused skip changed the row")
	}
	code, body = op.post(path, url.Values{"reason": {"re-emitted by hand as 4890"}})
	wantStatus(t, "skip", code, body, http.StatusSeeOther, "")
	if n := e.count(e.orders, `select count(*) from outbox where id = $1 and skipped_at is not null
		and skip_reason = 're-emitted by hand as 4890 (by op in the console)'`, id); n != 1 {
		t.Fatal("the row is not skipped with its reason")
	}
	wantAudit(t, e.audit(), 1, console.ActionOutboxSkip, "op", fmt.Sprint(id), "re-emitted by hand as 4890")
	code, body = e.login("op2").post(path, url.Values{"reason": {"me too"}})
	wantStatus(t, "second skip", code, body, http.StatusConflict, "another operator")
	if len(e.audit()) != 1 {
		t.Fatal("a refused skip was audited")
	}
}

func TestReplayRepublishesADeadLetterToItsTopicOnceAndAuditsIt(t *testing.T) {
	e := newEnv(t)
	topic := e.kafka.CreateTopic(t, "console-dlq", 1)
	group := e.prefix + "inventory-svc"
	key, value := []byte("order-1"), []byte("not json")
	id := e.deadLetter(e.inventory, group, topic, key, value)
	other := e.deadLetter(e.inventory, group, topic, []byte("order-2"), []byte("also not json"))
	op := e.login("op")
	code, body := op.post("/dead-letters/inventory-svc/replay", url.Values{"group": {group}, "id": {fmt.Sprint(id)}, "back": {"/dead-letters"}})
	wantStatus(t, "replay", code, body, http.StatusSeeOther, "")
	if n := e.count(e.inventory, `select count(*) from dead_letters where id = $1 and replayed_at is not null`, id); n != 1 {
		t.Fatal("the dead letter is not marked replayed")
	}
	if n := e.count(e.inventory, `select count(*) from dead_letters where id = $1 and replayed_at is null`, other); n != 1 {
		t.Fatal("replaying one dead letter replayed another")
	}
	wantAudit(t, e.audit(), 1, console.ActionDLQReplay, "op", fmt.Sprintf("%s: %d", group, id), "")

	// The record is back on its original topic with its key, value and headers.
	cl := e.kafka.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	recs := fs.Records()
	if len(recs) != 1 || string(recs[0].Key) != "order-1" || string(recs[0].Value) != "not json" ||
		len(recs[0].Headers) != 1 || string(recs[0].Headers[0].Value) != "order.created" {
		t.Fatalf("topic holds %d records (%+v); want the dead letter once", len(recs), recs)
	}

	code, body = e.login("op2").post("/dead-letters/inventory-svc/replay", url.Values{"group": {group}, "id": {fmt.Sprint(id)}})
	wantStatus(t, "second replay", code, body, http.StatusConflict, "was already replayed")

	// While another replay of the group runs (it holds the group's lock),
	// a replay is refused and publishes nothing.
	held, err := e.inventory.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	if _, err := held.Exec(context.Background(), `select pg_advisory_lock(hashtext('concord_console_dlq'), hashtext($1))`, group); err != nil {
		t.Fatal(err)
	}
	code, body = op.post("/dead-letters/inventory-svc/replay", url.Values{"group": {group}, "id": {fmt.Sprint(other)}})
	wantStatus(t, "replay during another", code, body, http.StatusConflict, "another operator is replaying")
	if _, err := held.Exec(context.Background(), `select pg_advisory_unlock(hashtext('concord_console_dlq'), hashtext($1))`, group); err != nil {
		t.Fatal(err)
	}
	if n := e.count(e.inventory, `select count(*) from dead_letters where id = $1 and replayed_at is null`, other); n != 1 {
		t.Fatal("a replay refused for a running one replayed")
	}
	code, body = op.post("/dead-letters/inventory-svc/replay", url.Values{"group": {group}, "id": {"424242"}})
	wantStatus(t, "unknown dead letter", code, body, http.StatusNotFound, "has no dead letter 424242")
	code, body = op.post("/dead-letters/inventory-svc/replay", url.Values{"group": {group}, "id": {"seven"}})
	wantStatus(t, "malformed id", code, body, http.StatusBadRequest, `id: &#34;seven&#34; is not a dead letter id`)
	code, body = op.post("/dead-letters/inventory-svc/replay", url.Values{"id": {fmt.Sprint(other)}})
	wantStatus(t, "no group", code, body, http.StatusBadRequest, "group: the consumer group")
	if len(e.audit()) != 1 {
		t.Fatal("a refused replay was audited")
	}

	// "Replay all" takes what is left, then finds nothing to do.
	code, body = op.post("/dead-letters/inventory-svc/replay", url.Values{"group": {group}})
	wantStatus(t, "replay all", code, body, http.StatusSeeOther, "")
	wantAudit(t, e.audit(), 2, console.ActionDLQReplay, "op", fmt.Sprintf("%s: %d", group, other), "")
	code, body = op.post("/dead-letters/inventory-svc/replay", url.Values{"group": {group}})
	wantStatus(t, "replay all again", code, body, http.StatusConflict, "has no dead letters waiting")
}

func TestResolveNeedsANoteAndResolvesOnce(t *testing.T) {
	e := newEnv(t)
	id := e.finding()
	op := e.login("op")
	path := fmt.Sprintf("/reconciliation/findings/%d/resolve", id)
	code, body := op.post(path, url.Values{"note": {""}})
	wantStatus(t, "resolve without a note", code, body, http.StatusBadRequest, "note: say what was done")
	code, body = op.post(path, url.Values{"note": {"refunded by hand, ticket 12"}, "back": {fmt.Sprintf("/reconciliation/findings/%d", id)}})
	wantStatus(t, "resolve", code, body, http.StatusSeeOther, "")
	if n := e.count(e.payments, `select count(*) from reconciliation_findings where id = $1 and resolution = 'manual'
		and resolved_by = 'op' and note = 'refunded by hand, ticket 12'`, id); n != 1 {
		t.Fatal("the finding is not resolved with the note and the operator")
	}
	wantAudit(t, e.audit(), 1, console.ActionFindingResolve, "op", fmt.Sprint(id), "refunded by hand, ticket 12")
	code, body = e.login("op2").post(path, url.Values{"note": {"me too"}})
	wantStatus(t, "second resolve", code, body, http.StatusConflict, "is already resolved")
	code, body = op.post("/reconciliation/findings/99999/resolve", url.Values{"note": {"x"}})
	wantStatus(t, "unknown finding", code, body, http.StatusNotFound, "there is no finding 99999")
	if len(e.audit()) != 1 {
		t.Fatal("a refused resolve was audited")
	}
}

func TestActionsWithoutSessionRoleOrTokenChangeNothing(t *testing.T) {
	e := newEnv(t)
	id, _ := e.parkedRow(e.orders)
	retry := fmt.Sprintf("/outbox/order-svc/%d/retry", id)
	anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	op, viewer := e.login("op"), e.login("viewer")
	code, body := do(t, anon, http.MethodPost, e.srv.URL+retry, url.Values{"csrf": {op.csrf}})
	wantStatus(t, "no session", code, body, http.StatusUnauthorized, "not logged in; nothing was changed")
	code, body = viewer.post(retry, nil)
	wantStatus(t, "read-only user", code, body, http.StatusForbidden, "viewer is read-only: only operators may act")
	code, body = op.post(retry, url.Values{"csrf": {""}})
	wantStatus(t, "no CSRF token", code, body, http.StatusForbidden, "CSRF token is missing")
	code, body = op.post(retry, url.Values{"csrf": {viewer.csrf}})
	wantStatus(t, "another session's CSRF token", code, body, http.StatusForbidden, "CSRF token is missing or not this session")
	code, body = op.post("/outbox/billing-svc/1/retry", nil)
	wantStatus(t, "unknown service", code, body, http.StatusNotFound, `unknown service &#34;billing-svc&#34;`)
	code, body = op.post("/outbox/order-svc/-4/retry", nil)
	wantStatus(t, "malformed id", code, body, http.StatusBadRequest, `id: &#34;-4&#34; is not a positive integer`)
	e.clock.Advance(2 * time.Hour)
	code, body = op.post(retry, nil)
	wantStatus(t, "expired session", code, body, http.StatusUnauthorized, "your session expired")
	if n := e.count(e.orders, `select count(*) from outbox where id = $1 and parked_at is not null and attempts = 10`, id); n != 1 {
		t.Fatal("a refused action changed the row")
	}
	if es := e.audit(); len(es) != 0 {
		t.Fatalf("refused actions were audited: %+v", es)
	}
	for outcome, want := range map[string]int{"unauthenticated": 2, "forbidden": 1, "csrf": 2, "refused": 2, "done": 0} {
		if got := e.actions(console.ActionOutboxRetry, outcome); got != want {
			t.Errorf("concord_console_actions_total{action=outbox.retry,outcome=%s} = %d; want %d", outcome, got, want)
		}
	}
}

func TestPagesAnswerBadInputWithAMessage(t *testing.T) {
	e := newEnv(t)
	op := e.login("op")
	for _, c := range []struct {
		path     string
		code     int
		contains string
	}{
		{"/timeline?q=" + url.QueryEscape("<script>x</script>"), http.StatusBadRequest, "is not an order or event id"},
		{"/timeline?q=0195a3b2-0000-7000-8000-000000000000", http.StatusNotFound, "no order and no event has the id"},
		{"/timeline?q=77", http.StatusNotFound, "no payment has the id 77"},
		{"/timeline?q=pi_nothing", http.StatusNotFound, "no payment has the provider id pi_nothing"},
		{"/timeline?q=evt_nothing", http.StatusNotFound, "no webhook of a known payment"},
		{"/reconciliation/findings/abc", http.StatusBadRequest, `id: &#34;abc&#34; is not a positive integer`},
		{"/reconciliation/findings/31337", http.StatusNotFound, "there is no finding 31337"},
		{"/", http.StatusOK, "order-svc"},
		{"/sagas", http.StatusOK, "no cancelled orders"},
		{"/outbox", http.StatusOK, "nothing parked"},
		{"/dead-letters", http.StatusOK, "No dead letters"},
		{"/reconciliation", http.StatusOK, "no drift recorded"},
		{"/audit", http.StatusOK, "no action yet"},
	} {
		code, body := op.get(c.path)
		wantStatus(t, "GET "+c.path, code, body, c.code, c.contains)
		if strings.Contains(body, "<script>x") {
			t.Fatalf("GET %s echoes the query unescaped", c.path)
		}
	}
	e.clock.Advance(2 * time.Hour)
	code, _ := op.get("/outbox")
	if code != http.StatusSeeOther {
		t.Fatalf("a page with an expired session: %d; want a redirect to the login", code)
	}
	resp, err := op.c.Get(e.srv.URL + "/outbox")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); !strings.Contains(loc, "expired=1") {
		t.Fatalf("redirect to %q; want the login saying the session expired", loc)
	}
	code, body := do(t, &http.Client{}, http.MethodPost, e.srv.URL+"/login", url.Values{"user": {"op"}, "password": {"wrong"}})
	wantStatus(t, "wrong password", code, body, http.StatusUnauthorized, "unknown user or wrong password")
}
