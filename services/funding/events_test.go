package funding_test

import (
	"testing"

	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/funding"
)

func TestEventDelta(t *testing.T) {
	for _, tc := range []struct {
		typ    contract.Type
		want   int64
		wantOK bool
	}{
		{contract.TypeAccountCredited, 250, true},
		{contract.TypeAccountDebited, -250, true},
		{contract.TypeAccountCreditReversed, -250, true},
		{contract.TypeAccountDebitReversed, 250, true},
		{contract.TypeOrderCreated, 0, false},
		{"account.frozen", 0, false},
	} {
		got, ok := funding.EventDelta(tc.typ, 250)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("EventDelta(%s, 250) = %d, %v; want %d, %v", tc.typ, got, ok, tc.want, tc.wantOK)
		}
	}
}
