// Package funding is the domain of the broker rail (seed 002): money moved
// for a customer's account through a broker API — cash journals between the
// firm's and the customer's account, ACH and wire transfers, funding-wallet
// transfers. It holds the pure decisions, no I/O: the map from each of the
// broker's status enums to the service's own statuses, which of them are
// final, and which change of status moves money (or takes it back).
//
// The broker speaks several dialects. Journal statuses are lowercase,
// transfer statuses uppercase; the REST enum of transfers and the funding
// event stream's enum are not the same set (the stream has EXPIRED and
// lacks PENDING); client libraries know values neither documents
// (SETTLED). So each domain maps the union of every documented spelling,
// case-insensitively, and an unknown value is reported, never guessed: the
// caller logs it, counts it and sends the record to review.
package funding

import "strings"

// Domain is one of the broker's status enums.
type Domain string

const (
	// Journal is a cash journal (JNLC) between two accounts.
	Journal Domain = "journal"
	// Transfer is an ACH or wire transfer of an account.
	Transfer Domain = "transfer"
	// WalletTransfer is a funding-wallet transfer (v1beta), a rail that
	// sends no events and is polled.
	WalletTransfer Domain = "wallet_transfer"
)

// Status is the service's own status of a money movement, the same for
// every rail.
type Status string

const (
	// Pending: accepted by the broker (a 200 means accepted, not
	// settled), no money moved yet.
	Pending Status = "PENDING"
	// Completed: the money moved. Not final — a journal can be corrected
	// and a transfer RETURNED after it looked complete — so a completed
	// record stays under reconciliation for a window.
	Completed Status = "COMPLETED"
	// Cancelled: ended without moving money (rejected, refused, canceled,
	// expired, deleted).
	Cancelled Status = "CANCELLED"
	// Reversed: the money moved and was taken back (an ACH return, a
	// corrected journal whose replacement is a new journal with its own
	// id). Reversing is a new event, never an edit of the first.
	Reversed Status = "REVERSED"
)

// statusMaps are the documented values of each domain, lowercased, and
// their meaning (../shared/notes/alpaca-broker-api.md lists the sources).
var statusMaps = map[Domain]map[string]Status{
	// queued → sent_to_clearing → executed (v1); executed then
	// activity_created (JNLC v2). executed "can be reversed"; correct
	// cancels an executed journal and issues a new one.
	Journal: {
		"queued": Pending, "pending": Pending, "sent_to_clearing": Pending,
		"executed": Completed, "activity_created": Completed,
		"rejected": Cancelled, "refused": Cancelled, "canceled": Cancelled, "deleted": Cancelled,
		"correct": Reversed,
	},
	// REST TransferStatus ∪ the funding stream's (EXPIRED) ∪ SETTLED of
	// the broker's own client library. RETURNED: "the bank issued an ACH
	// return". There is no failed.
	Transfer: {
		"queued": Pending, "approval_pending": Pending, "pending": Pending, "sent_to_clearing": Pending, "approved": Pending,
		"complete": Completed, "settled": Completed,
		"rejected": Cancelled, "canceled": Cancelled, "expired": Cancelled,
		"returned": Reversed,
	},
	// The spec's enum ∪ the funding-wallet guide's. A wallet transfer
	// that is EXECUTED is not yet COMPLETE and cannot be cancelled.
	WalletTransfer: {
		"pending": Pending, "executed": Pending,
		"complete": Completed,
		"rejected": Cancelled, "failed": Cancelled, "canceled": Cancelled,
	},
}

// Map is the service's status for the broker's status s of domain d,
// whatever its case and surrounding space. ok is false for a value the
// domain does not document (or an unknown domain): the caller logs and
// counts it and sends the record to review, and changes nothing.
func Map(d Domain, s string) (st Status, ok bool) {
	st, ok = statusMaps[d][strings.ToLower(strings.TrimSpace(s))]
	return st, ok
}

// Final reports whether the broker is done with a record in status st: no
// poll needs to ask about it again. Completed is not final — a completed
// record can still be reversed, which is why it stays under
// reconciliation for a window after it looks final.
func Final(st Status) bool { return st == Cancelled || st == Reversed }

// Effect is what a change of status does to the account's money.
type Effect int

const (
	// NoEffect: nothing moves (still pending, ended without moving, or a
	// change already applied).
	NoEffect Effect = iota
	// Apply: the movement takes effect (credit the deposit, debit the
	// withdrawal) — once, on the first news that it completed.
	Apply
	// Revert: the movement that took effect is taken back with a new,
	// opposite entry.
	Revert
	// ApplyAndRevert: the news that the movement was taken back came
	// before (or instead of) the news that it took effect; the broker's
	// history holds both, and so does the account's.
	ApplyAndRevert
)

// Next decides a status-guarded upsert: given the record's status (""
// for a record not seen before) and the status news reports, it returns
// the status to store, whether that is a change, and the effect on the
// account's money. News arrive duplicated and out of order (a stream
// replayed from its cursor, a poll racing a stream, a heal re-pull), so
// news that would move a record backwards (pending after completed) or
// out of a final status changes nothing. The broker is the authority on
// money, so a completed movement it later calls cancelled is taken back,
// and a reversal seen before its completion still records both entries.
func Next(current, news Status) (next Status, changed bool, effect Effect) {
	if Final(current) || rank(news) <= rank(current) {
		return current, false, NoEffect
	}
	switch {
	case news == Completed:
		return news, true, Apply
	case current == Completed && (news == Reversed || news == Cancelled):
		return news, true, Revert
	case news == Reversed:
		return news, true, ApplyAndRevert
	default:
		return news, true, NoEffect
	}
}

func rank(s Status) int {
	switch s {
	case "":
		return 0
	case Pending:
		return 1
	case Completed:
		return 2
	case Cancelled, Reversed:
		return 3
	default:
		return -1
	}
}
