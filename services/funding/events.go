package funding

import "github.com/concordhq/concord/schemas/contract"

// EventDelta is what an account.* event of amount (cents, positive) does to
// its account's balance: a credit and the reversal of a debit add, a debit
// and the reversal of a credit take away. ok is false for any other type.
func EventDelta(t contract.Type, amount int64) (delta int64, ok bool) {
	switch t {
	case contract.TypeAccountCredited, contract.TypeAccountDebitReversed:
		return amount, true
	case contract.TypeAccountDebited, contract.TypeAccountCreditReversed:
		return -amount, true
	}
	return 0, false
}
