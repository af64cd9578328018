package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/services/providersim"
)

// chromiumPath is Debian's chromium (infra/local/up installs it), or
// CHROMIUM_PATH.
func chromiumPath(t *testing.T) string {
	p := os.Getenv("CHROMIUM_PATH")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no Chromium at %s (infra/local/up installs Debian's chromium; or set CHROMIUM_PATH): %v", p, err)
	}
	return p
}

// screenshotDir is where the browser test leaves a screenshot of each page
// (git ignores it); CONSOLE_SCREENSHOTS moves it.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = "screenshots"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
	shot string
}

func newBrowser(t *testing.T, base string) *browser {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, base: base, shot: screenshotDir(t)}
	// The first run starts the browser, which lives as long as the context
	// of that run: it gets no deadline of its own (go test's applies).
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return b
}

// run runs actions with a deadline, failing the test with what it was doing.
func (b *browser) run(timeout time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	get(b, timeout, what, chromedp.Steps(actions...))
}

// get runs one action that returns a value, with a deadline.
func get[T any](b *browser, timeout time.Duration, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		b.t.Fatalf("%s (at %s): %v", what, loc, err)
	}
	return v
}

type navTiming struct {
	Answer float64 `json:"answer"` // request sent to the last byte of the response
	Loaded float64 `json:"loaded"` // navigation start to DOMContentLoaded end
}

// open loads a page, waits for its title, measures it with Navigation
// Timing, prints the figure and saves a screenshot.
func (b *browser) open(name, path string) navTiming {
	b.t.Helper()
	b.run(30*time.Second, "open "+path, chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS("#page-title")))
	nt := get(b, 30*time.Second, "timing of "+path, chromedp.Evaluate[navTiming](`(() => {
		const n = performance.getEntriesByType('navigation')[0];
		return {answer: n.responseEnd - n.requestStart, loaded: n.domContentLoadedEventEnd - n.startTime}; })()`))
	b.screenshot(name)
	fmt.Printf("console page %-16s answered in %6.1f ms (DOM ready %6.1f ms)\n", name, nt.Answer, nt.Loaded)
	if nt.Answer > 3000 {
		b.t.Errorf("page %s took %.0f ms to answer; the target is under 300 ms", name, nt.Answer)
	}
	return nt
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	png := get(b, 30*time.Second, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(b.shot, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return get(b, 30*time.Second, "read "+sel, chromedp.Text(chromedp.CSS(sel)))
}

func (b *browser) login(user string) {
	b.t.Helper()
	b.run(30*time.Second, "log in as "+user,
		chromedp.Navigate(b.base+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#user")),
		chromedp.SendKeys(chromedp.CSS("#user"), user),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#who")))
}

// postWithoutForm posts to path from the page's JavaScript, as a forged
// request would, and returns the status and the page's message.
func (b *browser) postWithoutForm(path, body string) (int, string) {
	b.t.Helper()
	type result struct {
		Status int    `json:"status"`
		Text   string `json:"text"`
	}
	res := get(b, 30*time.Second, "post "+path, chromedp.Evaluate[result](fmt.Sprintf(`fetch(%q, {method: 'POST', redirect: 'manual',
		headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: %q})
		.then(async r => ({status: r.status, text: await r.text()}))`, path, body), chromedp.EvalAwaitPromise))
	return res.Status, res.Text
}

// inOrder reports the first of want not found in got after the previous one.
func inOrder(got []string, want []string) error {
	i := 0
	for _, g := range got {
		if i < len(want) && strings.Contains(g, want[i]) {
			i++
		}
	}
	if i < len(want) {
		return fmt.Errorf("%q not found in order after %q", want[i], want[:i])
	}
	return nil
}

func TestConsoleInABrowserOverARealSaga(t *testing.T) {
	start := time.Now()
	d := startDeployment(t)
	d.stock("SKU-CONSOLE", 3)
	d.stock("SKU-SCARCE", 1)
	confirmed := d.order("SKU-CONSOLE", 1, providersim.PaymentMethodVisa)
	declined := d.order("SKU-CONSOLE", 1, providersim.PaymentMethodDeclined)
	short := d.order("SKU-SCARCE", 2, providersim.PaymentMethodVisa)
	for id, want := range map[string]string{confirmed: "CONFIRMED", declined: "CANCELLED (payment_declined)", short: "CANCELLED (out_of_stock)"} {
		if got := d.terminal(id); got != want {
			t.Fatalf("order %s is %s; want %s", id, got, want)
		}
	}
	// A parked row (as the relay leaves one whose attempts ran out), a
	// poison record inventory-svc dead-letters, a finding for review.
	parked, _ := d.parkedRow(d.orders)
	adm := d.kafka.Admin(t)
	parkedTopic := d.prefix + "parked.order-events"
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, parkedTopic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, parkedTopic)
	})
	forged, _ := d.parkedRow(d.orders)
	ctx := context.Background()
	if err := d.client.ProduceSync(ctx, &kgo.Record{Topic: d.prefix + "order-events", Key: []byte(short), Value: []byte("not json"),
		Headers: []kgo.RecordHeader{{Key: "event_type", Value: []byte("order.created")}, {Key: "event_version", Value: []byte("1")}}}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	group := d.prefix + "inventory-svc"
	var dead int64
	testkit.Eventually(t, 30*time.Second, "the poison record dead-lettered", func() error {
		return d.inventory.QueryRow(ctx, `select id from dead_letters where consumer_group = $1`, group).Scan(&dead)
	})
	var payID, finding int64
	if err := d.payments.QueryRow(ctx, `select id from payments where order_id = $1`, confirmed).Scan(&payID); err != nil {
		t.Fatal(err)
	}
	if err := d.payments.QueryRow(ctx, `insert into reconciliation_findings (payment_id, kind, verdict, local_status, external_status)
		values ($1, 'paid_locally_not_at_provider', 'needs_review', 'paid', 'requires_payment_method') returning id`, payID).Scan(&finding); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("console browser test: saga and seed data ready after %s\n", time.Since(start).Round(time.Millisecond))

	b := newBrowser(t, d.srv.URL)
	b.open("login", "/login")
	b.login("op")
	b.open("overview", "/")
	if got := b.text("#services"); !strings.Contains(got, "inventory-svc") || !strings.Contains(got, "payment-svc") {
		t.Errorf("overview services: %q", got)
	}
	if got := b.text("#groups"); !strings.Contains(got, group) || !strings.Contains(got, d.prefix+"order-events") {
		t.Errorf("overview consumer groups lack %s on order-events: %q", group, got)
	}
	b.open("sagas", "/sagas")
	if got := b.text("main"); !strings.Contains(got, "CONFIRMED") || !strings.Contains(got, "payment_declined") || !strings.Contains(got, "out_of_stock") {
		t.Errorf("sagas page: %q", got)
	}

	// The timeline of the confirmed order: every hop, in order.
	b.open("timeline", "/timeline?q="+confirmed)
	types := get(b, 30*time.Second, "read the events", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#events tr.event')].map(r => r.dataset.type)`))
	hops := get(b, 30*time.Second, "read the hops", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#hops tr.hop')].map(r => r.cells[2].innerText + ' ' + r.cells[3].innerText)`))
	if err := inOrder(types, []string{"order.created", "inventory.reserved", "payment.processed", "order.confirmed"}); err != nil {
		t.Errorf("events in causal order %v: %v", types, err)
	}
	if err := inOrder(hops, []string{
		"order-svc order placed", "order-svc order.created appended", "kafka order.created published",
		"inventory-svc order.created applied by " + group, "inventory-svc inventory.reserved appended",
		"kafka inventory.reserved published", "payment-svc inventory.reserved applied by " + d.prefix + "payment-svc",
		"payment-svc payment", "payment-svc payment.processed appended", "kafka payment.processed published",
		"order-svc order → CONFIRMED", "order-svc order.confirmed appended", "kafka order.confirmed published",
	}); err != nil {
		t.Errorf("hops %q: %v", hops, err)
	}
	b.run(30*time.Second, "search by payment id",
		chromedp.Navigate(b.base+fmt.Sprintf("/timeline?q=%d", payID)), chromedp.WaitVisible(chromedp.CSS("#order-id")))
	if got := b.text("#order-id"); !strings.Contains(got, confirmed) {
		t.Errorf("search by payment id %d found %q", payID, got)
	}

	// Retry the parked row: the relay of order-svc publishes it.
	b.open("outbox", "/outbox")
	b.run(30*time.Second, "retry the parked row",
		chromedp.Click(chromedp.CSS(fmt.Sprintf("#retry-order-svc-%d", parked))), chromedp.WaitVisible(chromedp.CSS("#flash")))
	testkit.Eventually(t, 30*time.Second, "the retried row published", func() error {
		if d.count(d.orders, `select count(*) from outbox where id = $1 and published_at is not null`, parked) != 1 {
			return fmt.Errorf("outbox row %d not published", parked)
		}
		return nil
	})

	// An action without the CSRF token is refused and changes nothing.
	status, body := b.postWithoutForm(fmt.Sprintf("/outbox/order-svc/%d/retry", forged), "back=/outbox")
	if status != 403 || !strings.Contains(body, "CSRF token is missing") {
		t.Errorf("retry without a CSRF token: %d %q", status, excerpt(body))
	}

	// Replay the dead letter: it goes back to order-events, where
	// inventory-svc meets it again (it is still poison) at a new offset.
	b.open("dead-letters", "/dead-letters")
	b.run(30*time.Second, "replay the dead letter",
		chromedp.Click(chromedp.CSS(fmt.Sprintf("#replay-%d", dead))), chromedp.WaitVisible(chromedp.CSS("#flash")))
	testkit.Eventually(t, 30*time.Second, "the replayed record consumed again", func() error {
		if d.count(d.inventory, `select count(*) from dead_letters where id = $1 and replayed_at is not null`, dead) != 1 {
			return fmt.Errorf("dead letter %d not marked replayed", dead)
		}
		if d.count(d.inventory, `select count(*) from dead_letters d where consumer_group = $1 and id > $2
			and "offset" > (select "offset" from dead_letters where id = $2)`, group, dead) != 1 {
			return fmt.Errorf("the re-published record has not reached inventory-svc again")
		}
		return nil
	})
	b.screenshot("dead-letters-after-replay")

	// Resolve the finding with a note.
	b.open("reconciliation", "/reconciliation")
	if got := b.text("#findings"); !strings.Contains(got, "paid_locally_not_at_provider") {
		t.Errorf("reconciliation findings: %q", got)
	}
	b.open("finding", fmt.Sprintf("/reconciliation/findings/%d", finding))
	b.run(30*time.Second, "resolve the finding",
		chromedp.SendKeys(chromedp.CSS("#resolve-note"), "provider confirms no charge; refunded the customer by hand"),
		chromedp.Click(chromedp.CSS("#resolve")), chromedp.WaitVisible(chromedp.CSS("#flash")))
	if got := b.text("#resolved"); !strings.Contains(got, "manual") || !strings.Contains(got, "op") {
		t.Errorf("resolved finding shows %q", got)
	}
	b.open("audit", "/audit")
	if got := b.text("#audit"); strings.Count(got, "\nop\t")+strings.Count(got, "op") < 3 ||
		!strings.Contains(got, "outbox.retry") || !strings.Contains(got, "dlq.replay") || !strings.Contains(got, "finding.resolve") {
		t.Errorf("audit log: %q", got)
	}

	// A read-only user sees no action and cannot post one.
	b.run(30*time.Second, "log out", chromedp.Click(chromedp.CSS("form.who button")), chromedp.WaitVisible(chromedp.CSS("#user")))
	b.login("viewer")
	b.open("outbox-read-only", "/outbox")
	buttons := get(b, 30*time.Second, "count action buttons", chromedp.Evaluate[int](`document.querySelectorAll('button.retry, button.skip').length`))
	if buttons != 0 {
		t.Errorf("a read-only user sees %d action buttons", buttons)
	}
	status, body = b.postWithoutForm(fmt.Sprintf("/outbox/order-svc/%d/retry", forged), "back=/outbox")
	if status != 403 || !strings.Contains(body, "only operators may act") {
		t.Errorf("retry by a read-only user: %d %q", status, excerpt(body))
	}
	if d.count(d.orders, `select count(*) from outbox where id = $1 and parked_at is not null`, forged) != 1 {
		t.Error("a refused action released the row")
	}
	fmt.Printf("console browser test: done after %s\n", time.Since(start).Round(time.Millisecond))
}
