package audit_test

import (
	"testing"

	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/audit"
	"github.com/concordhq/concord/services/funding"
)

// healthyRail is a quiet rail that keeps every invariant. Account a1: a
// journal deposit of 50.00 (j1), a corrected journal (j2, 20.00, now
// correct) and its replacement (j3, 19.99), a journal withdrawal of 5.00
// (j4); account a2: an ACH deposit of 30.00 returned (t1), an ACH deposit of
// 10.00 (t2), a refused journal (j5) and a funding-wallet transfer of 7.00
// (w1). funding-svc was killed once; its cursors carried on.
func healthyRail() audit.RailSnapshot {
	mv := func(id int64, d funding.Domain, broker, account, dir string, amount int64, st funding.Status, brokerStatus string) audit.RailMovement {
		return audit.RailMovement{ID: id, Domain: d, BrokerID: broker, IntentKey: "k-" + broker, AccountID: account, Direction: dir, Amount: amount,
			Status: st, BrokerStatus: brokerStatus}
	}
	return audit.RailSnapshot{
		Movements: []audit.RailMovement{
			mv(1, funding.Journal, "j1", "a1", "credit", 5000, funding.Completed, "executed"),
			mv(2, funding.Journal, "j2", "a1", "credit", 2000, funding.Reversed, "correct"),
			{ID: 3, Domain: funding.Journal, BrokerID: "j3", AccountID: "a1", Direction: "credit", Amount: 1999, Status: funding.Completed, BrokerStatus: "executed"},
			mv(4, funding.Journal, "j4", "a1", "debit", 500, funding.Completed, "executed"),
			mv(5, funding.Transfer, "t1", "a2", "credit", 3000, funding.Reversed, "RETURNED"),
			mv(6, funding.Transfer, "t2", "a2", "credit", 1000, funding.Completed, "COMPLETE"),
			mv(7, funding.Journal, "j5", "a2", "credit", 100, funding.Cancelled, "refused"),
			{ID: 8, Domain: funding.WalletTransfer, BrokerID: "w1", AccountID: "a2", Direction: "credit", Amount: 700, Status: funding.Completed, BrokerStatus: "COMPLETE"},
		},
		Entries: []audit.RailEntry{
			{MovementID: 1, Kind: "apply", AccountID: "a1", Amount: 5000},
			{MovementID: 2, Kind: "apply", AccountID: "a1", Amount: 2000},
			{MovementID: 2, Kind: "revert", AccountID: "a1", Amount: -2000},
			{MovementID: 3, Kind: "apply", AccountID: "a1", Amount: 1999},
			{MovementID: 4, Kind: "apply", AccountID: "a1", Amount: -500},
			{MovementID: 5, Kind: "apply", AccountID: "a2", Amount: 3000},
			{MovementID: 5, Kind: "revert", AccountID: "a2", Amount: -3000},
			{MovementID: 6, Kind: "apply", AccountID: "a2", Amount: 1000},
			{MovementID: 8, Kind: "apply", AccountID: "a2", Amount: 700},
		},
		Balances:   map[string]int64{"a1": 6499, "a2": 1700},
		Projection: map[string]audit.Projected{"a1": {Balance: 6499, Events: 5}, "a2": {Balance: 1700, Events: 4}},
		Events: []audit.AccountEvent{
			{EventID: "e1", Type: contract.TypeAccountCredited, AccountID: "a1", MovementID: "j1", Amount: 5000},
			{EventID: "e2", Type: contract.TypeAccountCredited, AccountID: "a1", MovementID: "j2", Amount: 2000},
			{EventID: "e3", Type: contract.TypeAccountCreditReversed, AccountID: "a1", MovementID: "j2", Amount: 2000},
			{EventID: "e4", Type: contract.TypeAccountCredited, AccountID: "a1", MovementID: "j3", Amount: 1999},
			{EventID: "e5", Type: contract.TypeAccountDebited, AccountID: "a1", MovementID: "j4", Amount: 500},
			{EventID: "e6", Type: contract.TypeAccountCredited, AccountID: "a2", MovementID: "t1", Amount: 3000},
			{EventID: "e7", Type: contract.TypeAccountCreditReversed, AccountID: "a2", MovementID: "t1", Amount: 3000},
			{EventID: "e8", Type: contract.TypeAccountCredited, AccountID: "a2", MovementID: "t2", Amount: 1000},
			{EventID: "e9", Type: contract.TypeAccountCredited, AccountID: "a2", MovementID: "w1", Amount: 700},
		},
		Broker: []audit.BrokerRecord{
			{Domain: funding.Journal, ID: "j1", AccountID: "a1", Direction: "credit", Amount: 5000, Status: "executed"},
			{Domain: funding.Journal, ID: "j2", AccountID: "a1", Direction: "credit", Amount: 2000, Status: "correct"},
			{Domain: funding.Journal, ID: "j3", AccountID: "a1", Direction: "credit", Amount: 1999, Status: "executed"},
			{Domain: funding.Journal, ID: "j4", AccountID: "a1", Direction: "debit", Amount: 500, Status: "executed"},
			{Domain: funding.Transfer, ID: "t1", AccountID: "a2", Direction: "credit", Amount: 3000, Status: "RETURNED"},
			{Domain: funding.Transfer, ID: "t2", AccountID: "a2", Direction: "credit", Amount: 1000, Status: "COMPLETE"},
			{Domain: funding.Journal, ID: "j5", AccountID: "a2", Direction: "credit", Amount: 100, Status: "refused"},
			{Domain: funding.WalletTransfer, ID: "w1", AccountID: "a2", Direction: "credit", Amount: 700, Status: "COMPLETE"},
		},
		Cash: map[string]int64{"a1": 6499, "a2": 1700},
		Streams: []audit.StreamWindow{
			{Stream: "journals", AtKill: "01J0000000000000000000000A", After: "01J0000000000000000000000F",
				Broker: []string{"01J0000000000000000000000B", "01J0000000000000000000000D"},
				Seen:   map[string]bool{"01J0000000000000000000000A": true, "01J0000000000000000000000B": true, "01J0000000000000000000000D": true}},
		},
	}
}

func TestAHealthyRailKeepsEveryInvariant(t *testing.T) {
	for _, r := range audit.Rail(healthyRail()) {
		if !r.Holds() {
			t.Errorf("%s: %s", r.Check, r.Detail())
		}
	}
}

// Each case breaks one invariant of the healthy rail the way a bug in
// funding-svc would; the check named must report a violation about
// subject.
func TestEachRailCheckFindsItsViolation(t *testing.T) {
	for _, tc := range []struct {
		name, check, subject, problem string
		breakIt                       func(s *audit.RailSnapshot)
	}{
		{"a dropped message never healed", "every local record converged", "journal j1", "local PENDING, broker executed", func(s *audit.RailSnapshot) {
			s.Movements[0].Status = funding.Pending
		}},
		{"a record the broker made alone never mirrored", "every local record converged", "wallet_transfer w1", "not mirrored", func(s *audit.RailSnapshot) {
			s.Movements = s.Movements[:7]
		}},
		{"a mirror of the wrong amount", "every local record converged", "transfer t2", "local a2 credit 999", func(s *audit.RailSnapshot) {
			s.Movements[5].Amount = 999
		}},
		{"a local record the broker never had", "every local record converged", "journal j9", "unknown to the broker", func(s *audit.RailSnapshot) {
			s.Movements = append(s.Movements, audit.RailMovement{ID: 9, Domain: funding.Journal, BrokerID: "j9", AccountID: "a1", Direction: "credit", Amount: 1, Status: funding.Pending})
		}},
		{"an intent whose answer never came", "every local record converged", "intent k-lost", "never came", func(s *audit.RailSnapshot) {
			s.Movements = append(s.Movements, audit.RailMovement{ID: 9, Domain: funding.Journal, IntentKey: "k-lost", AccountID: "a1", Direction: "credit", Amount: 1})
		}},
		{"a status the map does not know", "every local record converged", "journal j1", "in no map", func(s *audit.RailSnapshot) {
			s.Broker[0].Status = "mystery"
		}},
		{"a balance off the broker's cash", "each account's projected balance", "account a1", "broker cash 6499, balance 8499", func(s *audit.RailSnapshot) {
			s.Balances["a1"] += 2000
		}},
		{"events that do not add up to the cash", "each account's projected balance", "account a2", "events 4700", func(s *audit.RailSnapshot) {
			s.Events = append(s.Events[:6], s.Events[7:]...) // t1's reversal never announced
		}},
		{"a projection that applied an event twice", "each account's projected balance", "account a1", "projection 11499 (6 of 5 events applied)", func(s *audit.RailSnapshot) {
			s.Projection["a1"] = audit.Projected{Balance: 11499, Events: 6}
		}},
		{"a projection that took a reversal the wrong way", "each account's projected balance", "account a2", "projection 7700 (4 of 4 events applied)", func(s *audit.RailSnapshot) {
			s.Projection["a2"] = audit.Projected{Balance: 7700, Events: 4}
		}},
		{"a projection that missed an event", "each account's projected balance", "account a2", "projection 1000 (3 of 4 events applied)", func(s *audit.RailSnapshot) {
			s.Projection["a2"] = audit.Projected{Balance: 1000, Events: 3}
		}},
		{"an account the broker does not have", "each account's projected balance", "account a3", "unknown to the broker", func(s *audit.RailSnapshot) {
			s.Balances["a3"] = 0
		}},
		{"a broker record mirrored twice", "no money moved twice", "journal j1", "mirrored 2 times", func(s *audit.RailSnapshot) {
			s.Movements = append(s.Movements, audit.RailMovement{ID: 9, Domain: funding.Journal, BrokerID: "j1", AccountID: "a1", Direction: "credit", Amount: 5000, Status: funding.Completed})
			s.Entries = append(s.Entries, audit.RailEntry{MovementID: 9, Kind: "apply", AccountID: "a1", Amount: 5000})
			s.Events = append(s.Events, audit.AccountEvent{EventID: "e10", Type: contract.TypeAccountCredited, AccountID: "a1", MovementID: "j1", Amount: 5000})
		}},
		{"a credit announced twice", "no money moved twice", "movement j1", "account.credited recorded 2 times", func(s *audit.RailSnapshot) {
			s.Events = append(s.Events, audit.AccountEvent{EventID: "e10", Type: contract.TypeAccountCredited, AccountID: "a1", MovementID: "j1", Amount: 5000})
		}},
		{"a completed movement without its entry", "no money moved twice", "transfer t2", "COMPLETED with 0 apply", func(s *audit.RailSnapshot) {
			s.Entries = append(s.Entries[:7], s.Entries[8:]...)
		}},
		{"money moved for a refused journal", "no money moved twice", "journal j5", "CANCELLED with 1 apply and 0 revert", func(s *audit.RailSnapshot) {
			s.Entries = append(s.Entries, audit.RailEntry{MovementID: 7, Kind: "apply", AccountID: "a2", Amount: 100})
		}},
		{"an entry without its event", "no money moved twice", "movement j4", "account.debited recorded 0 times, its entries call for 1", func(s *audit.RailSnapshot) {
			s.Events = append(s.Events[:4], s.Events[5:]...)
		}},
		{"a return applied by editing history", "every correction and return reflected", "transfer t1", "without a revert entry", func(s *audit.RailSnapshot) {
			s.Entries = append(s.Entries[:6], s.Entries[7:]...)
			s.Entries[4].Amount = 0
		}},
		{"a correction without a reversing event", "every correction and return reflected", "journal j2", "no reversing event", func(s *audit.RailSnapshot) {
			s.Events = append(s.Events[:2], s.Events[3:]...)
		}},
		{"a return never mirrored", "every correction and return reflected", "transfer t1", "not mirrored", func(s *audit.RailSnapshot) {
			s.Movements[4].BrokerID = "t1-lost"
		}},
		{"news sent to review", "no broker news sent to review", "review", "unknown_status", func(s *audit.RailSnapshot) {
			s.Reviews = append(s.Reviews, "journal j1 mystery: unknown_status")
		}},
		{"a restart that read from now", "the SSE cursors survived", "stream journals", "1 of 2 events after the cursor never taken in", func(s *audit.RailSnapshot) {
			delete(s.Streams[0].Seen, "01J0000000000000000000000B")
		}},
		{"a cursor that went back", "the SSE cursors survived", "stream journals", "cursor went back", func(s *audit.RailSnapshot) {
			s.Streams[0].After = "01H0000000000000000000000A"
		}},
		{"no cursor persisted", "the SSE cursors survived", "stream journals", "no cursor persisted", func(s *audit.RailSnapshot) {
			s.Streams[0].AtKill = ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := healthyRail()
			tc.breakIt(&s)
			wantViolation(t, audit.Rail(s), tc.check, tc.subject, tc.problem)
		})
	}
}

// The demo waits on ProjectionCaughtUp before the checks: it holds only
// once every account's projection applied as many events as were committed.
func TestProjectionCaughtUp(t *testing.T) {
	s := healthyRail()
	if !s.ProjectionCaughtUp() {
		t.Fatal("the healthy rail's projection is not caught up")
	}
	s.Projection["a2"] = audit.Projected{Balance: 1000, Events: 3}
	if s.ProjectionCaughtUp() {
		t.Error("a projection short of one of a2's events counts as caught up")
	}
	delete(s.Projection, "a2")
	if s.ProjectionCaughtUp() {
		t.Error("a projection without a2 counts as caught up")
	}
}
