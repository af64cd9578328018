// Package fundingrepair is the funding-commands handler funding-svc runs:
// it applies the reconciler's funding.apply_broker_status commands through
// funding-svc's canonical writer — the status-guarded upsert its stream
// intake uses — and resolves the finding each came from, in the
// consumer's transaction.
//
// The writer only moves a record forward (funding.Next), so a command
// that arrives after the stream brought the same news changes nothing and
// resolves its finding as already_applied; one that finds the record
// moved elsewhere resolves it as superseded, and the next scan classifies
// the record afresh.
package fundingrepair

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingstore"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
)

// Topic is where the reconciler's funding commands are published.
var Topic = contract.TypeFundingApplyBrokerStatus.Topic()

// Types are the commands Register handles.
var Types = []contract.Type{contract.TypeFundingApplyBrokerStatus}

// ResolvedBy is recorded on the findings the handler resolves.
const ResolvedBy = "funding-svc"

// Register adds the handler to the consuming service's mux; store's outbox
// writer carries the account.* events the entries append.
func Register(mux *idempotent.Mux, store *fundingstore.Store) {
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.FundingApplyBrokerStatusV1, _ outbox.Emitter) error {
		return Apply(ctx, tx, store, ev, d)
	})
}

// BatchHandler applies a batch one event after another through mux, which
// may hold other handlers than Register's (funding-svc's also projects
// account-events).
func BatchHandler(mux *idempotent.Mux) idempotent.BatchHandler {
	return func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event, out outbox.Emitter) error {
		for _, ev := range evs {
			if err := mux.Handle(ctx, tx, ev, out); err != nil {
				return err
			}
		}
		return nil
	}
}

// Apply applies one command in tx and resolves its finding.
func Apply(ctx context.Context, tx pgx.Tx, store *fundingstore.Store, ev idempotent.Event, d contract.FundingApplyBrokerStatusV1) error {
	domain := funding.Domain(d.Domain)
	target, ok := funding.Map(domain, d.BrokerStatus)
	if !ok {
		// The reconciler sends unknown statuses to review, never here.
		return idempotent.Permanent(fmt.Errorf("repair command %s: %s %s: status %q is unknown", ev.EventID, domain, d.BrokerID, d.BrokerStatus))
	}
	n := fundingstore.News{Domain: domain, BrokerID: d.BrokerID, BrokerStatus: d.BrokerStatus,
		Source: reconciler.RepairSource(d.FindingID)}
	if d.Amount != nil {
		n.Details = &fundingstore.Movement{AccountID: d.AccountID, Direction: fundingstore.Direction(d.Direction),
			Amount: *d.Amount, Currency: d.Currency}
	}
	res, err := store.Apply(ctx, tx, n)
	if err != nil {
		return fmt.Errorf("repair command %s: %s %s (finding %d) → %s: %w", ev.EventID, domain, d.BrokerID, d.FindingID, d.BrokerStatus, err)
	}
	how, note := Resolution(res, target, d.BrokerStatus)
	if _, err := reconcilerstore.ResolveFinding(ctx, tx, d.FindingID, how, ResolvedBy, note); err != nil {
		return fmt.Errorf("repair command %s: %s %s: %w", ev.EventID, domain, d.BrokerID, err)
	}
	return nil
}

// Resolution is how a command's finding is resolved once the writer
// applied the broker's status (target, spelled brokerStatus) with result
// res: repaired when the record moved, already_applied when it was there
// already (the stream got there first), superseded otherwise — the writer
// sent the news to review, or the record had moved where the status does
// not lead — with a note saying which; the next scan classifies it afresh.
func Resolution(res fundingstore.Result, target funding.Status, brokerStatus string) (reconciler.Resolution, string) {
	switch {
	case res.Changed:
		return reconciler.ResolutionRepaired, ""
	case res.Review:
		return reconciler.ResolutionSuperseded, "the writer sent the news to review"
	case res.Status == target:
		return reconciler.ResolutionAlreadyApplied, ""
	default:
		return reconciler.ResolutionSuperseded, fmt.Sprintf("movement was %s when the command (%s) arrived", res.Status, brokerStatus)
	}
}
