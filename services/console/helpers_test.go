package console_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/crypto/bcrypt"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/console"
	"github.com/concordhq/concord/services/inventory/inventorystore"
	"github.com/concordhq/concord/services/order/orderstore"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
)

const password = "correct horse battery"

// testUsers are an operator (op, and a second one, op2) and a read-only
// user (viewer). The hashes use bcrypt's lowest cost: tests log in often.
func testUsers(t testing.TB) console.Users {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	us, err := console.ParseUsers(strings.NewReader(fmt.Sprintf("op operator %s\nop2 operator %s\nviewer read-only %s\n", h, h, h)))
	if err != nil {
		t.Fatal(err)
	}
	return us
}

// clock is a settable clock for session expiry.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.off += d; c.mu.Unlock() }

// env is a console over fresh databases of its own (the services' tables
// migrated, as the services migrate them) and the shared broker.
type env struct {
	t                               *testing.T
	orders, inventory, payments, db *pgxpool.Pool
	kafka                           *testkit.Kafka
	client                          *kgo.Client
	clock                           *clock
	sessions                        console.Sessions
	srv                             *httptest.Server
	prefix                          string
	metrics                         *prometheus.Registry
}

func serviceDB(t *testing.T, own ...func(context.Context, *pgxpool.Pool) error) *pgxpool.Pool {
	return testkit.NewPool(t, append([]func(context.Context, *pgxpool.Pool) error{outbox.Migrate, idempotent.Migrate}, own...)...)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, kafka: testkit.NewKafka(t), prefix: testkit.UniqueName(t, "console") + "."}
	e.orders = serviceDB(t, orderstore.Migrate)
	e.inventory = serviceDB(t, inventorystore.Migrate)
	e.payments = serviceDB(t, paymentstore.Migrate, reconcilerstore.Migrate)
	e.serve()
	return e
}

// serve starts the console over e's databases, with a database of its own
// for the audit log.
func (e *env) serve() {
	t := e.t
	t.Helper()
	e.clock = &clock{}
	e.db = testkit.NewPool(t, console.Migrate)
	e.client = e.kafka.Client(t, kgo.ProducerLinger(0))
	e.sessions = console.Sessions{Key: bytes.Repeat([]byte("s"), 32), TTL: time.Hour}
	e.metrics = prometheus.NewRegistry()
	srv, err := console.New(console.Config{
		Registerer: e.metrics,
		Orders:     console.Service{Name: "order-svc", Pool: e.orders},
		Inventory:  console.Service{Name: "inventory-svc", Pool: e.inventory},
		Payments:   console.Service{Name: "payment-svc", Pool: e.payments},
		Audit:      e.db, Admin: e.kafka.Admin(t), Producer: e.client,
		Users: testUsers(t), Sessions: e.sessions, Now: e.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(srv)
	t.Cleanup(e.srv.Close)
}

// user is a logged-in browser-less client.
type user struct {
	e      *env
	c      *http.Client
	cookie *http.Cookie
	csrf   string
}

func (e *env) login(name string) *user {
	e.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(e.srv.URL+"/login", url.Values{"user": {name}, "password": {password}})
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("login %s: %s", name, resp.Status)
	}
	u, _ := url.Parse(e.srv.URL)
	var ck *http.Cookie
	for _, k := range jar.Cookies(u) {
		if k.Name == "concord_console" {
			ck = k
		}
	}
	if ck == nil {
		e.t.Fatalf("login %s: no session cookie", name)
	}
	ss, err := e.sessions.Check(ck.Value, e.clock.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return &user{e: e, c: c, cookie: ck, csrf: e.sessions.CSRF(ss)}
}

// post submits an action form with the user's CSRF token (unless form
// sets csrf itself) and returns the status and body.
func (u *user) post(path string, form url.Values) (int, string) {
	u.e.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", u.csrf)
	}
	return do(u.e.t, u.c, http.MethodPost, u.e.srv.URL+path, form)
}

func (u *user) get(path string) (int, string) {
	u.e.t.Helper()
	return do(u.e.t, u.c, http.MethodGet, u.e.srv.URL+path, nil)
}

func do(t *testing.T, c *http.Client, method, target string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// parkedRow appends an event to order-svc's outbox on a topic nobody
// consumes and parks it, as the relay does when its attempts run out.
func (e *env) parkedRow(pool *pgxpool.Pool) (int64, string) {
	e.t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	env, err := outbox.Writer{TopicPrefix: e.prefix + "parked."}.Append(ctx, tx, outbox.Event{Payload: contract.OrderCancelledV1{
		OrderID: uuid.NewString(), Reason: "timeout"}})
	if err != nil {
		e.t.Fatal(err)
	}
	var id int64
	if err := tx.QueryRow(ctx, `update outbox set parked_at = now(), attempts = 10,
		last_error = 'MESSAGE_TOO_LARGE: the request included a message larger than the max message size the server will accept'
		where event_id = $1 returning id`, env.EventID).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		e.t.Fatal(err)
	}
	return id, env.EventID
}

// deadLetter records a poison record of group as the idempotent runner does
// (the record's original bytes, key and headers, and the reason).
func (e *env) deadLetter(pool *pgxpool.Pool, group, topic string, key, value []byte) int64 {
	e.t.Helper()
	var id int64
	err := pool.QueryRow(context.Background(), `insert into dead_letters (consumer_group, topic, partition, "offset", event_id, event_type,
			record_key, record_value, record_headers, reason, error, dlq_topic)
		values ($1, $2, 0, (select coalesce(max("offset"), 0) + 1 from dead_letters), 'evt-poison', 'order.created', $3, $4,
			'[{"key":"event_type","value":"b3JkZXIuY3JlYXRlZA=="}]', 'decode', 'invalid character ''o'' in literal null', $1 || '.dlq')
		returning id`, group, topic, key, value).Scan(&id)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// finding records a needs_review finding of a paid payment.
func (e *env) finding() int64 {
	e.t.Helper()
	ctx := context.Background()
	var pay, id int64
	order := testkit.UniqueName(e.t, "ord")
	if err := e.payments.QueryRow(ctx, `insert into payments (order_id, idempotency_key, provider_payment_id, amount, currency, status)
		values ($1, $1, 'pi_' || md5($1), 2000, 'EUR', 'paid') returning id`, order).Scan(&pay); err != nil {
		e.t.Fatal(err)
	}
	if err := e.payments.QueryRow(ctx, `insert into reconciliation_findings (payment_id, kind, verdict, local_status, external_status)
		values ($1, 'paid_locally_not_at_provider', 'needs_review', 'paid', 'requires_payment_method') returning id`, pay).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) count(pool *pgxpool.Pool, query string, args ...any) int {
	e.t.Helper()
	return testkit.Count(e.t, pool, query, args...)
}

func (e *env) audit() []console.AuditEntry {
	e.t.Helper()
	es, err := console.RecentAudit(context.Background(), e.db, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return es
}

// actions counts the console's actions with outcome, from its metrics.
func (e *env) actions(action, outcome string) int {
	e.t.Helper()
	mfs, err := e.metrics.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "concord_console_actions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["action"] == action && labels["outcome"] == outcome {
				return int(m.GetCounter().GetValue())
			}
		}
	}
	return 0
}
