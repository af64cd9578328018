package reconciler

import (
	"strconv"
	"time"

	"github.com/concordhq/concord/schemas/contract"
)

// Finding is one recorded drift, as stored in reconciliation_findings. At
// most one finding per payment and kind is open (unresolved) at a time.
type Finding struct {
	ID             int64
	PaymentID      int64
	OrderID        string
	ProviderID     string
	Kind           Kind
	Verdict        Verdict
	LocalStatus    string
	ExternalStatus string
	RepairCommand  Command // empty unless Verdict is Repairable
	CommandEventID string  // the outbox event id of the repair command
	Source         Source
	DetectedAt     time.Time
	ResolvedAt     *time.Time
	Resolution     Resolution
	ResolvedBy     string
	Note           string
}

// Resolution says how a finding was closed.
type Resolution string

// Resolutions.
const (
	// ResolutionRepaired: the repair command moved the payment.
	ResolutionRepaired Resolution = "repaired"
	// ResolutionAlreadyApplied: the payment had already reached the target
	// status (the live webhook won the race); nothing left to do.
	ResolutionAlreadyApplied Resolution = "already_applied"
	// ResolutionSuperseded: when the command arrived the payment was in a
	// status the command does not apply from; the next scan classifies it
	// afresh.
	ResolutionSuperseded Resolution = "superseded"
	// ResolutionCleared: a later scan verified the payment in sync.
	ResolutionCleared Resolution = "cleared"
	// ResolutionManual: a person resolved it (`reconciler findings resolve`).
	ResolutionManual Resolution = "manual"
)

// RepairCommandData is the data of a payment.apply_* command event (see
// schemas/events/payment.apply_succeeded/v1.schema.json).
type RepairCommandData struct {
	PaymentID              string    `json:"payment_id"`
	OrderID                string    `json:"order_id"`
	ProviderPaymentID      string    `json:"provider_payment_id"`
	FindingID              int64     `json:"finding_id"`
	Kind                   Kind      `json:"kind"`
	ExpectedLocalStatus    string    `json:"expected_local_status"`
	ObservedProviderStatus string    `json:"observed_provider_status"`
	DetectedAt             time.Time `json:"detected_at"`
}

// Payload is c as the event of command cmd; ok is false for a command
// the contract does not know.
func (c RepairCommandData) Payload(cmd Command) (p contract.Payload, ok bool) {
	switch contract.Type(cmd) {
	case contract.TypePaymentApplySucceeded:
		return contract.PaymentApplySucceededV1{PaymentID: c.PaymentID, OrderID: c.OrderID, ProviderPaymentID: c.ProviderPaymentID,
			FindingID: c.FindingID, Kind: string(c.Kind), DetectedAt: c.DetectedAt,
			ExpectedLocalStatus:    contract.PaymentApplySucceededV1ExpectedLocalStatus(c.ExpectedLocalStatus),
			ObservedProviderStatus: contract.PaymentApplySucceededV1ObservedProviderStatus(c.ObservedProviderStatus)}, true
	case contract.TypePaymentApplyCanceled:
		return contract.PaymentApplyCanceledV1{PaymentID: c.PaymentID, OrderID: c.OrderID, ProviderPaymentID: c.ProviderPaymentID,
			FindingID: c.FindingID, Kind: string(c.Kind), DetectedAt: c.DetectedAt,
			ExpectedLocalStatus:    contract.PaymentApplyCanceledV1ExpectedLocalStatus(c.ExpectedLocalStatus),
			ObservedProviderStatus: contract.PaymentApplyCanceledV1ObservedProviderStatus(c.ObservedProviderStatus)}, true
	}
	return nil, false
}

// RepairSource is the source a repair command's transition is recorded
// under in payment_transitions: how an audit tells a payment healed through
// the canonical writer from one moved some other way.
func RepairSource(findingID int64) string {
	return "reconciler:finding-" + strconv.FormatInt(findingID, 10)
}
