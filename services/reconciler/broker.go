package reconciler

import (
	"time"

	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/funding"
)

// The broker rail (issue 16, seed 002): funding-svc's mirror of the
// broker's journals and transfers is compared with the broker through the
// same verdicts, findings and repair commands as payments. What differs is
// only the row (a money movement), the statuses (funding's status maps)
// and the canonical writer the command goes to (funding-svc's
// status-guarded upsert).

// Finding kinds of the broker rail.
const (
	// KindMissedAcceptance: the broker accepted a record the mirror holds
	// with no status yet. Repairable.
	KindMissedAcceptance Kind = "missed_acceptance"
	// KindMissedCompletion: pending here, completed at the broker (a
	// dropped stream message). Repairable: the writer credits or debits.
	KindMissedCompletion Kind = "missed_completion"
	// KindMissedCancellation: pending here, ended at the broker without
	// moving money. Repairable.
	KindMissedCancellation Kind = "missed_cancellation"
	// KindMissedReversal: completed here, taken back at the broker (an ACH
	// return after COMPLETE, a corrected or cancelled journal). Repairable:
	// the writer books the opposite entry, never edits the first.
	KindMissedReversal Kind = "missed_reversal"
	// KindMissedCompletionAndReversal: pending here, completed and taken
	// back at the broker. Repairable: both entries are booked.
	KindMissedCompletionAndReversal Kind = "missed_completion_and_reversal"
	// KindMissingLocally: the broker holds a record the mirror has never
	// seen (a correction's replacement, a transfer made elsewhere, an
	// event lost). Repairable: the writer mirrors it under its broker id,
	// as the stream intake does for a record it does not know.
	KindMissingLocally Kind = "missing_locally"
	// KindCompletedLocallyNotAtBroker: the mirror moved the money, the
	// broker says it has not yet. Needs review.
	KindCompletedLocallyNotAtBroker Kind = "completed_locally_not_at_broker"
	// KindFinalLocallyNotAtBroker: the mirror holds the record as ended
	// (cancelled or reversed) while the broker says it is still pending or
	// completed: money may be missing from the projection. The canonical
	// writer never moves a final record, so a person decides.
	KindFinalLocallyNotAtBroker Kind = "final_locally_not_at_broker"
	// KindMissingBrokerReference: past the grace window an intent still
	// has no broker id (an answer lost and never looked up).
	KindMissingBrokerReference Kind = "missing_broker_reference"
	// KindUndescribedAtBroker: the broker holds a record the mirror does
	// not, and its account, direction or amount cannot be read.
	KindUndescribedAtBroker Kind = "undescribed_at_broker"
)

// CommandApplyBrokerStatus asks funding-svc to apply a broker status
// through its canonical writer.
const CommandApplyBrokerStatus = Command(contract.TypeFundingApplyBrokerStatus)

// DefaultExecutedWindow is how long a movement that looks final (completed,
// cancelled, reversed) is still compared with the broker after its last
// change: "executed" is not final (seed 002) — an ACH return usually comes
// within two banking days of the completion, a journal correction is a
// manual step of the broker's operations — so five days cover a return
// across a weekend and a holiday.
const DefaultExecutedWindow = 120 * time.Hour

// DefaultBrokerJob is the cursor of the broker rail's scan.
const DefaultBrokerJob = "broker-vs-funding"

// Movement is the local side of one funding movement: a row of
// funding_movements.
type Movement struct {
	ID        int64
	Domain    funding.Domain
	BrokerID  string // empty while the broker has not answered
	AccountID string
	Direction string // credit | debit
	Amount    int64
	Currency  string
	Status    funding.Status // "" until the broker accepted it
	CreatedAt time.Time
	UpdatedAt time.Time
}

// BrokerRecord is the broker's view of one journal or transfer, reduced to
// what classification and a repair need. Status is the broker's own
// spelling; the account, direction and amount describe the record for a
// mirror that does not hold it (Amount 0: not describable).
type BrokerRecord struct {
	Domain    funding.Domain
	BrokerID  string
	AccountID string
	Status    string
	Direction string // credit | debit
	Amount    int64
	Currency  string
	CreatedAt time.Time
}

// Settled reports whether a movement is left out of the scan: it looks
// final (completed, cancelled, reversed) and has not changed for the
// executed window. A record the broker is still working on is never
// settled; one that only looks final stays under reconciliation for the
// window, because a return or a correction can still come.
func Settled(status funding.Status, updatedAt, now time.Time, executedWindow time.Duration) bool {
	switch status {
	case funding.Completed, funding.Cancelled, funding.Reversed:
		return now.Sub(updatedAt) >= executedWindow
	}
	return false
}

var knownMovementStatus = map[funding.Status]bool{"": true, funding.Pending: true, funding.Completed: true,
	funding.Cancelled: true, funding.Reversed: true}

// ClassifyMovement compares a movement's local status with the broker's
// status of the same record (domain d). It is pure. The rule is the one
// of Classify: repair automatically exactly what the canonical writer
// would apply had the stream message arrived (funding.Next moves the
// record forward), and send to a person what the writer would refuse —
// the mirror ahead of the broker, or a record the mirror ended that the
// broker has not.
func ClassifyMovement(d funding.Domain, local funding.Status, broker string) Decision {
	if !knownMovementStatus[local] {
		return Decision{Verdict: NeedsReview, Kind: KindUnknownLocalStatus}
	}
	news, ok := funding.Map(d, broker)
	if !ok {
		return Decision{Verdict: NeedsReview, Kind: KindUnknownExternalStatus}
	}
	if news == local {
		if news == funding.Pending {
			return Decision{Verdict: InFlight}
		}
		return Decision{Verdict: InSync}
	}
	if _, changed, _ := funding.Next(local, news); changed {
		return Decision{Verdict: Repairable, Kind: missedKind(local, news), Command: CommandApplyBrokerStatus}
	}
	switch {
	case local == funding.Completed && news == funding.Pending:
		return Decision{Verdict: NeedsReview, Kind: KindCompletedLocallyNotAtBroker}
	case funding.Final(local) && !funding.Final(news):
		return Decision{Verdict: NeedsReview, Kind: KindFinalLocallyNotAtBroker}
	}
	return Decision{Verdict: NeedsReview, Kind: Unexpected(string(local), string(news))}
}

func missedKind(local, news funding.Status) Kind {
	switch news {
	case funding.Pending:
		return KindMissedAcceptance
	case funding.Completed:
		return KindMissedCompletion
	}
	if local == funding.Completed {
		return KindMissedReversal
	}
	if news == funding.Reversed {
		return KindMissedCompletionAndReversal
	}
	return KindMissedCancellation
}

// DecideMovement turns a movement and what the broker said about it into a
// Decision, as Decide does for a payment. A settled movement is not
// passed here (see Settled).
func DecideMovement(m Movement, obs Observation, now time.Time, grace time.Duration) Decision {
	if now.Sub(m.UpdatedAt) < grace {
		return Decision{Verdict: InFlight}
	}
	if m.BrokerID == "" {
		return Decision{Verdict: NeedsReview, Kind: KindMissingBrokerReference, Verified: true}
	}
	switch obs.Outcome {
	case Observed:
		d := ClassifyMovement(m.Domain, m.Status, obs.Status)
		d.Verified = true
		return d
	case NotFound:
		return Decision{Verdict: NeedsReview, Kind: KindMissingExternally, Verified: true}
	default:
		return Decision{Verdict: Unverifiable}
	}
}

// DecideUnknown decides a broker record the mirror has no row for: it is
// mirrored through the canonical writer (Repairable) when it can be
// described, unless it was created within grace (the stream is most likely
// about to bring it).
func DecideUnknown(r BrokerRecord, now time.Time, grace time.Duration) Decision {
	if _, ok := funding.Map(r.Domain, r.Status); !ok {
		return Decision{Verdict: NeedsReview, Kind: KindUnknownExternalStatus, Verified: true}
	}
	if !r.CreatedAt.IsZero() && now.Sub(r.CreatedAt) < grace {
		return Decision{Verdict: InFlight}
	}
	if r.AccountID == "" || r.Amount <= 0 || (r.Direction != "credit" && r.Direction != "debit") {
		return Decision{Verdict: NeedsReview, Kind: KindUndescribedAtBroker, Verified: true}
	}
	return Decision{Verdict: Repairable, Kind: KindMissingLocally, Command: CommandApplyBrokerStatus, Verified: true}
}

// MovementResult is the decision about one broker record: the local row
// (Known false: none) and what the broker said.
type MovementResult struct {
	Movement Movement
	Known    bool
	Broker   BrokerRecord
	Decision Decision
}

// MovementPage is one keyset page of movements (see Page).
type MovementPage struct {
	Job      string
	CursorID int64
	Rows     []Movement
	Now      time.Time
}

// BrokerRef names one broker record.
type BrokerRef struct {
	Domain   funding.Domain
	BrokerID string
}

// MovementLag is the broker rail's reconciliation lag: a bound on how long
// any movement has gone without a visit of the scan. The mirror keeps no
// per-row verification time (the reconciler does not write funding's
// tables), but a full cycle visits every row that existed when it started:
// so the bound is the time since the last completed cycle started, or
// since the oldest movement was created when that is later (or no cycle
// has completed). No movements, no lag. oldest and cycleStart are nil when
// unknown.
func MovementLag(now time.Time, oldest, cycleStart *time.Time) time.Duration {
	if oldest == nil {
		return 0
	}
	from := *oldest
	if cycleStart != nil && cycleStart.After(from) {
		from = *cycleStart
	}
	return max(now.Sub(from), 0)
}
