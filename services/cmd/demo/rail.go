package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/services/audit"
	"github.com/concordhq/concord/services/audit/auditsnapshot"
	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingapi"
	"github.com/concordhq/concord/services/funding/fundingbroker"
)

// The broker rail (seed 002): broker-sim and funding-svc, driven through
// funding-svc's API with the broker misbehaving. Its story, in order:
//
//  1. Deposits by cash journal and ACH for every account while the streams
//     disconnect, duplicate and reorder; funding-svc is killed with
//     SIGKILL as soon as the first credit is booked, and while it is down
//     ACH transfers settle, a journal is corrected and a transfer
//     RETURNED after COMPLETE. Restarted, it must read on from its
//     persisted cursors. Withdrawals follow.
//  2. With the broker dropping stream messages (all of one deposit's):
//     more deposits, a second correction and return; the drops stop, money
//     arrives in funding wallets, which send no events at all, and the
//     reconciler's heal re-pulls the window and repairs what the streams
//     never said.
//
// Then the rail's invariants (audit.Rail) are checked against the broker.
const (
	brokerKey    = "CK_CONCORD_DEMO"
	brokerSecret = "concord-demo-secret"
	// railSettle is broker-sim's settlement step: an ACH or wallet
	// transfer completes two steps after it is made.
	railSettle = time.Second
)

type rail struct {
	c                   config
	sim, api, ops       string // broker-sim, funding-svc's API and ops listener
	firm                string
	accounts            []string
	broker              *fundingbroker.Client
	pool                *pgxpool.Pool
	svc                 *proc.Process
	atKill              map[string]string // cursors funding-svc left when killed
	streams             []audit.StreamWindow
	healCLI             bool   // the reconciler has `broker heal`
	healed              string // what the heal printed
	corrected, returned []string
	wallet              int
	started             time.Time
}

// startRail starts broker-sim (fresh state under the log directory) and
// funding-svc on a fresh database, under funding-svc's own Kafka principal.
func startRail(ctx context.Context, r *running, c config) (*rail, error) {
	rl := &rail{c: c, started: time.Now(), sim: fmt.Sprintf("http://127.0.0.1:%d", r.ports["broker-sim"]),
		api: fmt.Sprintf("http://127.0.0.1:%d", r.ports["funding-svc"]), ops: r.ops["funding-svc"]}
	rl.broker = &fundingbroker.Client{BaseURL: rl.sim, KeyID: brokerKey, Secret: brokerSecret, HTTP: &http.Client{Timeout: 10 * time.Second}}
	dataDir := filepath.Join(c.logDir, "broker-sim-data")
	if err := os.RemoveAll(dataDir); err != nil {
		return nil, err
	}
	// No rate limit: the demo's own reads of the broker (waiting for it to
	// settle, the audit) would otherwise crowd funding-svc out of it.
	p, err := start(c.binDir, c.logDir, "broker-sim", nil, append([]string{"--http-addr", fmt.Sprintf("127.0.0.1:%d", r.ports["broker-sim"]),
		"--admin", "--api-key", brokerKey, "--api-secret", brokerSecret, "--seed", fmt.Sprint(c.seed), "--data-dir", dataDir,
		"--settlement-delay", railSettle.String(), "--rate-limit", "0", "--log-format", "json"}, faultArgs(c.brokerFaults)...)...)
	if err != nil {
		return nil, err
	}
	r.procs = append(r.procs, p)
	if err := p.WaitReady(ctx, rl.sim+"/healthz", 20*time.Second); err != nil {
		return nil, err
	}
	var firm struct {
		Firm string `json:"firm_account"`
	}
	if err := rl.call(ctx, http.MethodGet, rl.sim+"/__admin/firm", nil, &firm); err != nil {
		return nil, err
	}
	rl.firm = firm.Firm
	// The stream rewind is short, so a message the broker dropped stays
	// missing until the heal re-pulls its window; the resume loop and the
	// poller run every second so the run settles in seconds. A static
	// group member: restarted after its kill, it takes its partitions of
	// the repair commands back at once, not after the session timeout.
	rl.svc, err = start(c.binDir, c.logDir, "funding-svc", append(r.serviceEnv(c, "funding-svc"), "CONCORD_DATABASE_URL="+c.dbURLs["funding-svc"],
		"CONCORD_GROUP_INSTANCE_ID=funding-svc-1"),
		"--broker-url", rl.sim, "--broker-key-id", brokerKey, "--broker-secret", brokerSecret, "--firm-account", rl.firm,
		"--stream-rewind", "2s", "--poll-interval", "1s", "--resume-interval", "1s")
	if err != nil {
		return nil, err
	}
	r.procs = append(r.procs, rl.svc)
	if err := rl.svc.WaitReady(ctx, rl.ops+"/readyz", 60*time.Second); err != nil {
		return nil, err
	}
	if rl.pool, err = pgxpool.New(ctx, c.dbURLs["funding-svc"]); err != nil {
		return nil, err
	}
	r.pools["funding-svc"] = rl.pool
	rl.healCLI = exec.CommandContext(ctx, filepath.Join(c.binDir, "reconciler"), "broker", "heal", "--help").Run() == nil
	for range c.railAccounts {
		var a struct {
			ID string `json:"id"`
		}
		if err := rl.call(ctx, http.MethodPost, rl.sim+"/v1/accounts", map[string]any{}, &a); err != nil {
			return nil, fmt.Errorf("open a broker account: %w", err)
		}
		rl.accounts = append(rl.accounts, a.ID)
	}
	return rl, nil
}

// run drives the rail through its faults and heals it.
func (rl *rail) run(ctx context.Context, step func(string, ...any)) error {
	step("broker rail: %d accounts at broker-sim %s (faults: %s), funding-svc %s", len(rl.accounts), rl.sim, orNone(rl.c.brokerFaults), rl.api)
	var deposits []fundingapi.Movement
	for i, a := range rl.accounts {
		j, err := rl.journal(ctx, fmt.Sprintf("dep-%d", i), a, "deposit", int64(50_000+100*i))
		if err != nil {
			return err
		}
		t, err := rl.transfer(ctx, fmt.Sprintf("ach-%d", i), a, "deposit", int64(20_000+100*i))
		if err != nil {
			return err
		}
		deposits = append(deposits, j, t)
	}
	if err := rl.kill(ctx, step, deposits[0], deposits[3]); err != nil {
		return err
	}
	for i, a := range rl.accounts {
		if _, err := rl.journal(ctx, fmt.Sprintf("wd-%d", i), a, "withdrawal", 7_500); err != nil {
			return err
		}
		if i%2 == 0 {
			if _, err := rl.transfer(ctx, fmt.Sprintf("ach-wd-%d", i), a, "withdrawal", 2_500); err != nil {
				return err
			}
		}
	}
	if err := rl.converged(ctx, step, "withdrawals made"); err != nil {
		return err
	}
	// The cursor check reads the broker's replay of each stream, which
	// the broker's stream faults would cut short: they pause meanwhile.
	if err := rl.faults(ctx, "sse-disconnect-rate=0,sse-duplicate-rate=0,sse-reorder-rate=0"); err != nil {
		return err
	}
	var err error
	if rl.streams, err = auditsnapshot.StreamWindows(ctx, rl.pool, rl.broker, rl.atKill); err != nil {
		return err
	}
	return rl.dropsAndHeal(ctx, step)
}

// kill SIGKILLs funding-svc once the first credit is booked, corrects a
// journal and returns a transfer while it is down, and restarts it.
func (rl *rail) kill(ctx context.Context, step func(string, ...any), journal, transfer fundingapi.Movement) error {
	// Mid-stream: every stream has taken messages in (each has a cursor
	// to survive) and money has started moving.
	if err := waitFor(ctx, 30*time.Second, "every stream's cursor and a first credit", func() (bool, error) {
		return rl.count(ctx, `select count(*) from funding_stream_cursors`) == 3 && rl.count(ctx, `select count(*) from funding_entries`) > 0, nil
	}); err != nil {
		return err
	}
	rl.svc.Kill()
	var err error
	if rl.atKill, err = auditsnapshot.Cursors(ctx, rl.pool); err != nil {
		return err
	}
	down := time.Now()
	if err := rl.correct(ctx, journal); err != nil {
		return err
	}
	if err := rl.returnTransfer(ctx, transfer); err != nil {
		return err
	}
	if err := rl.svc.Restart(); err != nil {
		return err
	}
	if err := rl.svc.WaitReady(ctx, rl.ops+"/readyz", 60*time.Second); err != nil {
		return err
	}
	step("broker rail: funding-svc killed with SIGKILL mid-stream (cursors %s), restarted %s later; meanwhile journal %s corrected, transfer %s returned",
		cursorList(rl.atKill), time.Since(down).Round(time.Millisecond), journal.BrokerID, transfer.BrokerID)
	return nil
}

// dropsAndHeal has the broker drop stream messages while money moves —
// journals, a correction, a return, and funding-wallet transfers that
// send no events — then stops the drops and heals the window.
func (rl *rail) dropsAndHeal(ctx context.Context, step func(string, ...any)) error {
	drops := fmt.Sprintf("sse-drop-rate=%g", rl.c.brokerDropRate)
	if !rl.healCLI {
		// Without the heal, a dropped message and a wallet transfer nobody
		// was told of would stay missing: the window runs without them.
		drops = "sse-drop-rate=0"
		step("broker rail: the reconciler has no `broker heal` yet: no dropped messages and no wallet transfers in this run")
	}
	// No disconnects in this half: a reconnect re-reads a little before its
	// cursor and would bring dropped messages back; here only the heal does.
	if err := rl.faults(ctx, rl.c.brokerFaults+",sse-disconnect-rate=0,"+drops); err != nil {
		return err
	}
	since := time.Now().Add(-time.Second)
	if rl.healCLI {
		if err := rl.lostDeposit(ctx, drops); err != nil {
			return err
		}
	}
	var made []fundingapi.Movement
	for i, a := range rl.accounts {
		j, err := rl.journal(ctx, fmt.Sprintf("dep2-%d", i), a, "deposit", int64(30_000+100*i))
		if err != nil {
			return err
		}
		t, err := rl.transfer(ctx, fmt.Sprintf("ach2-%d", i), a, "deposit", 10_000)
		if err != nil {
			return err
		}
		made = append(made, j, t)
	}
	if err := rl.correct(ctx, made[2]); err != nil {
		return err
	}
	if err := rl.returnTransfer(ctx, made[len(made)-1]); err != nil {
		return err
	}
	if err := rl.settledAtBroker(ctx, 60*time.Second); err != nil {
		return err
	}
	step("broker rail: more deposits, a correction and a return settled at the broker (streams without disconnects, %s)", drops)
	if err := rl.faults(ctx, rl.c.brokerFaults+",sse-drop-rate=0"); err != nil {
		return err
	}
	if rl.healCLI {
		// Money arriving in funding wallets, as in Alpaca's sandbox: no
		// event tells funding-svc. The heal finds them still pending, and
		// funding-svc's poller sees them complete.
		for i, a := range rl.accounts {
			if i%2 == 0 {
				continue
			}
			if err := rl.call(ctx, http.MethodPost, rl.sim+"/v1beta/demo/banking/funding",
				map[string]string{"account_id": a, "amount": fundingbroker.FormatCents(int64(4_000 + 100*i))}, nil); err != nil {
				return fmt.Errorf("wallet transfer to %s: %w", a, err)
			}
			rl.wallet++
		}
		// The window's ends go in whole seconds: until rounds up, so what
		// was just made falls inside it.
		out, err := rl.heal(ctx, since.Truncate(time.Second), time.Now().Truncate(time.Second).Add(time.Second))
		if err != nil {
			return err
		}
		rl.healed = out
		step("broker rail: healed the window since %s", since.UTC().Format(time.TimeOnly))
	}
	return rl.converged(ctx, step, "after the heal")
}

// lostDeposit makes one deposit while the broker drops every stream
// message, and then sets the drops back: funding-svc learns that it
// executed from the heal, or from a replay of its rewind if a stream
// reconnects first.
func (rl *rail) lostDeposit(ctx context.Context, drops string) error {
	before := rl.stats(ctx)["sse_dropped"]
	if err := rl.faults(ctx, "sse-drop-rate=1"); err != nil {
		return err
	}
	if _, err := rl.journal(ctx, "dep-lost", rl.accounts[0], "deposit", 12_345); err != nil {
		return err
	}
	// The journal's status event and its two activities (the customer's,
	// the firm's) are dropped as they are sent, after the answer.
	if err := waitFor(ctx, 5*time.Second, "the lost deposit's stream messages dropped", func() (bool, error) {
		return rl.stats(ctx)["sse_dropped"] >= before+3, nil
	}); err != nil {
		fmt.Printf("    %v\n", err)
	}
	return rl.faults(ctx, drops)
}

// stats are broker-sim's counters (empty when it does not answer).
func (rl *rail) stats(ctx context.Context) map[string]int64 {
	stats := map[string]int64{}
	_ = rl.call(ctx, http.MethodGet, rl.sim+"/__admin/stats", nil, &stats)
	return stats
}

// heal re-pulls the broker's window [since, until) and repairs what
// funding-svc missed: `reconciler broker heal` (issue 16, item 3). This is
// the only place the demo heals the rail.
func (rl *rail) heal(ctx context.Context, since, until time.Time) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(rl.c.binDir, "reconciler"), "broker", "heal",
		"--since", since.UTC().Format(time.RFC3339), "--until", until.UTC().Format(time.RFC3339),
		"--funding-database-url", rl.c.dbURLs["funding-svc"], "--broker-url", rl.sim, "--broker-key-id", brokerKey, "--broker-secret", brokerSecret,
		"--firm-account", rl.firm, "--topic-prefix", rl.c.prefix,
		// The whole run is younger than the default grace: judge it all.
		"--grace", "0s")
	cmd.Env = append(os.Environ(), "CONCORD_LOG_FORMAT=json")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("reconciler broker heal: %w: %s", err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

func (rl *rail) journal(ctx context.Context, request, account, kind string, amount int64) (fundingapi.Movement, error) {
	return rl.submit(ctx, "/v1/funding/journals", fundingapi.JournalRequest{RequestID: request, AccountID: account, Kind: kind, Amount: amount})
}

func (rl *rail) transfer(ctx context.Context, request, account, kind string, amount int64) (fundingapi.Movement, error) {
	return rl.submit(ctx, "/v1/funding/transfers", fundingapi.TransferRequest{RequestID: request, AccountID: account,
		RelationshipID: "rel-" + account[:8], Kind: kind, Amount: amount})
}

// submit posts a request to funding-svc's API; an unknown outcome (503)
// is submitted again under the same request id, as the API asks.
func (rl *rail) submit(ctx context.Context, path string, req any) (fundingapi.Movement, error) {
	var m fundingapi.Movement
	err := waitFor(ctx, 30*time.Second, "POST "+path, func() (bool, error) {
		err := rl.call(ctx, http.MethodPost, rl.api+path, req, &m)
		var he *httpError
		if errors.As(err, &he) && he.status == http.StatusServiceUnavailable {
			return false, nil
		}
		return err == nil, err
	})
	return m, err
}

// correct corrects an executed journal at the broker (its amount less a
// dollar): the original ends correct and a new journal replaces it.
func (rl *rail) correct(ctx context.Context, j fundingapi.Movement) error {
	if err := rl.call(ctx, http.MethodPost, rl.sim+"/__admin/journals/"+j.BrokerID+"/correct",
		map[string]string{"amount": fundingbroker.FormatCents(j.Amount - 100)}, nil); err != nil {
		return fmt.Errorf("correct journal %s: %w", j.BrokerID, err)
	}
	rl.corrected = append(rl.corrected, j.BrokerID)
	return nil
}

// returnTransfer waits for an ACH transfer to be COMPLETE at the broker and
// has the bank return it.
func (rl *rail) returnTransfer(ctx context.Context, t fundingapi.Movement) error {
	if err := waitFor(ctx, 30*time.Second, "transfer "+t.BrokerID+" COMPLETE", func() (bool, error) {
		ts, err := rl.broker.ListTransfers(ctx, t.AccountID)
		for _, x := range ts {
			if x.ID == t.BrokerID {
				return x.Status == "COMPLETE", err
			}
		}
		return false, err
	}); err != nil {
		return err
	}
	if err := rl.call(ctx, http.MethodPost, rl.sim+"/__admin/transfers/"+t.BrokerID+"/return", map[string]string{"reason": "R01 insufficient funds"}, nil); err != nil {
		return fmt.Errorf("return transfer %s: %w", t.BrokerID, err)
	}
	rl.returned = append(rl.returned, t.BrokerID)
	return nil
}

func (rl *rail) faults(ctx context.Context, knobs string) error {
	values := map[string]string{}
	for _, kv := range strings.Split(knobs, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
			values[k] = v
		}
	}
	return rl.call(ctx, http.MethodPost, rl.sim+"/__admin/faults", values, nil)
}

// snapshot reads the rail for the audit.
func (rl *rail) snapshot(ctx context.Context) (audit.RailSnapshot, error) {
	s, err := auditsnapshot.ReadRail(ctx, auditsnapshot.RailSources{Funding: rl.pool, Broker: rl.broker, Firm: rl.firm, Accounts: rl.accounts})
	s.Streams = rl.streams
	return s, err
}

// settledAtBroker waits until the broker is done moving money: no record
// of the accounts still pending there.
func (rl *rail) settledAtBroker(ctx context.Context, timeout time.Duration) error {
	return waitFor(ctx, timeout, "the broker settles every record", func() (bool, error) {
		s, err := rl.snapshot(ctx)
		return err == nil && pendingAtBroker(s) == 0, err
	})
}

// converged waits until the broker is settled, funding-svc mirrors it,
// every account.* event is published and its consumer-built projection
// applied them all, and says how long that took. A rail
// that does not converge is no error here: the invariants then say what
// is left; only ctx's end is.
func (rl *rail) converged(ctx context.Context, step func(string, ...any), when string) error {
	var last audit.Result
	t0 := time.Now()
	err := waitFor(ctx, 90*time.Second, "funding-svc converges on the broker", func() (bool, error) {
		s, err := rl.snapshot(ctx)
		if err != nil {
			return false, err
		}
		last = audit.RailConverged(s)
		unpublished := rl.count(ctx, `select count(*) from outbox where published_at is null`)
		return pendingAtBroker(s) == 0 && last.Holds() && unpublished == 0 && s.ProjectionCaughtUp(), nil
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		step("broker rail, %s: %v (%s)", when, err, last.Detail())
	default:
		step("broker rail, %s: funding-svc converged on the broker in %s", when, time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

func pendingAtBroker(s audit.RailSnapshot) int {
	n := 0
	for _, b := range s.Broker {
		if st, _ := funding.Map(b.Domain, b.Status); st == funding.Pending {
			n++
		}
	}
	return n
}

// railSummary prints what the rail did and what the broker's faults were.
func (rl *rail) summary(ctx context.Context, s audit.RailSnapshot) {
	fmt.Printf("  broker rail (%d accounts, %s)\n", len(rl.accounts), time.Since(rl.started).Round(time.Second))
	byStatus := map[string]int{}
	for _, m := range s.Movements {
		byStatus[fmt.Sprintf("%s %s", m.Domain, m.Status)]++
	}
	for _, k := range slices.Sorted(maps.Keys(byStatus)) {
		fmt.Printf("    %-34s %5d\n", k, byStatus[k])
	}
	stats := rl.stats(ctx)
	fmt.Printf("    %-34s %5d\n", "stream messages dropped", stats["sse_dropped"])
	fmt.Printf("    %-34s %5d\n", "stream messages duplicated", stats["sse_duplicated"])
	fmt.Printf("    %-34s %5d\n", "stream messages reordered", stats["sse_reordered"])
	fmt.Printf("    %-34s %5d\n", "streams disconnected", stats["sse_disconnects"])
	fmt.Printf("    %-34s %5d (%s)\n", "journals corrected", len(rl.corrected), strings.Join(rl.corrected, ", "))
	fmt.Printf("    %-34s %5d (%s)\n", "transfers RETURNED after COMPLETE", len(rl.returned), strings.Join(rl.returned, ", "))
	fmt.Printf("    %-34s %5d\n", "wallet transfers (no events)", rl.wallet)
	fmt.Printf("    %-34s %5d\n", "stream messages taken in", rl.count(ctx, `select count(*) from funding_stream_intake`))
	fmt.Printf("    %-34s %5d\n", "account events projected", rl.count(ctx, `select coalesce(sum(events), 0) from account_balance_projection`))
	if rl.healed != "" {
		fmt.Println("    reconciler broker heal:")
		for _, l := range strings.Split(strings.TrimSpace(rl.healed), "\n") {
			fmt.Println("      " + l)
		}
	}
}

// count runs a counting query on funding-svc's database (-1 when it fails).
func (rl *rail) count(ctx context.Context, sql string) int64 {
	var n int64
	if err := rl.pool.QueryRow(ctx, sql).Scan(&n); err != nil {
		return -1
	}
	return n
}

// hints prints where to look at the rail, beside the demo's other hints.
func (rl *rail) hints() {
	fmt.Printf(`  broker rail    curl -s %[1]s/v1/funding/accounts/%[2]s/balance | jq      (funding-svc's API)
                 curl -s %[3]s/__admin/stats | jq      (broker-sim)
                 psql '%[4]s' -c 'select domain, status, count(*), sum(amount) from funding_movements group by 1, 2'
`, rl.api, rl.accounts[0], rl.sim, rl.c.dbURLs["funding-svc"])
}

func cursorList(cs map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(cs)) {
		parts = append(parts, k+"="+cs[k])
	}
	return strings.Join(parts, " ")
}

// waitFor polls cond every quarter second until it holds, fails or
// timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("%s: not within %s: %w", what, timeout, err)
			}
			return fmt.Errorf("%s: not within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string { return fmt.Sprintf("%d %s", e.status, e.body) }

// call sends a JSON request (with the broker's credentials, which
// funding-svc's API ignores) and decodes a 2xx answer into out.
func (rl *rail) call(ctx context.Context, method, url string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.SetBasicAuth(brokerKey, brokerSecret)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %w", method, url, &httpError{res.StatusCode, strings.TrimSpace(string(b))})
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}
