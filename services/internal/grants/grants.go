// Package grants says what each service's Kafka principal may do, and
// provisions those principals on an authenticated cluster: a SCRAM-SHA-512
// user per service and ACLs that let it write only the topics it produces,
// read only the topics it consumes, and use only its own consumer group
// and dead-letter topic. Anything else it asks of the broker is refused
// (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED): a service
// taken over, or a bug that routes an event to the wrong topic, cannot
// write another service's events.
//
// The services' in-process relays publish with the service's own
// principal, so an outbox row for a topic the service does not own is
// refused by the broker and parked, never published.
package grants

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/funding/fundingprojection"
	"github.com/concordhq/concord/services/inventory/inventoryconsumer"
	"github.com/concordhq/concord/services/orchestrator/orchestratorconsumer"
	"github.com/concordhq/concord/services/order/orderconsumer"
	"github.com/concordhq/concord/services/payment/paymentconsumer"
	"github.com/concordhq/concord/services/reconciler/fundingrepair"
	"github.com/concordhq/concord/services/reconciler/repair"
	"github.com/concordhq/concord/services/shipping/shippingconsumer"
)

// Service is one service's rights, topic names before any prefix. Its
// principal and its consumer group are both named after it.
type Service struct {
	Name   string
	Writes []string // topics it produces (its outbox's rows)
	Reads  []string // topics it consumes
}

// Services are the saga's services. The reconciler has no principal: it
// writes its repair commands to the payments database's outbox, which
// payment-svc's relay publishes, and to the funding database's, which
// funding-svc's relay publishes; provider-sim and carrier-sim never talk
// to Kafka.
var Services = []Service{
	{Name: "order-svc", Reads: orderconsumer.Topics,
		Writes: topics(contract.TypeOrderCreated, contract.TypeSagaCheckoutRequested)},
	{Name: "inventory-svc", Reads: inventoryconsumer.Topics,
		Writes: topics(contract.TypeInventoryReserved, contract.TypeSagaStepReplied)},
	// payment-svc's relay also publishes the reconciler's repair commands
	// (payment-commands), written to the same database's outbox.
	{Name: "payment-svc", Reads: union(paymentconsumer.Topics, []string{repair.Topic, paymentconsumer.HoldTopic}),
		Writes: union(topics(contract.TypePaymentProcessed, contract.TypeSagaStepReplied), []string{repair.Topic})},
	{Name: "orchestrator", Reads: orchestratorconsumer.Topics,
		Writes: topics(contract.TypePaymentAuthorizeHold, contract.TypeInventoryReserveStock,
			contract.TypeShippingCreateShipment, contract.TypeSagaFinished)},
	{Name: "shipping-svc", Reads: shippingconsumer.Topics, Writes: topics(contract.TypeSagaStepReplied)},
	// funding-svc's news comes from the broker's streams and polls; from
	// Kafka it reads the reconciler's repair commands, which its own relay
	// publishes from the funding database's outbox, and its own account
	// events, which its balance projection applies.
	{Name: "funding-svc", Reads: []string{fundingrepair.Topic, fundingprojection.Topic},
		Writes: union(topics(contract.TypeAccountCredited, contract.TypeAccountDebited), []string{fundingrepair.Topic})},
}

// Credential is a provisioned principal's SASL user and password.
type Credential struct {
	User, Password string
}

// DLQ is the dead-letter topic of a consumer group (idempotent.Config's
// default).
func DLQ(group string) string { return group + ".dlq" }

// ACLs are the service's allow rules on a deployment whose topics and
// groups carry prefix, for the principal user ("User:" is added).
func (s Service) ACLs(prefix, user string) []*kadm.ACLBuilder {
	pre := func(ts []string) []string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = prefix + t
		}
		return out
	}
	group := prefix + s.Name
	allow := func() *kadm.ACLBuilder {
		return kadm.NewACLs().Allow("User:" + user).AllowHosts("*").ResourcePatternType(kadm.ACLPatternLiteral)
	}
	// CREATE on its own topics: the services create what they consume
	// and what they write first (--create-topics) and their dead-letter
	// topic; creating a topic that exists already needs it too.
	return []*kadm.ACLBuilder{
		allow().Topics(pre(s.Writes)...).Operations(kadm.OpWrite, kadm.OpDescribe, kadm.OpCreate),
		allow().Topics(pre(s.Reads)...).Operations(kadm.OpRead, kadm.OpDescribe, kadm.OpCreate),
		allow().Topics(DLQ(group)).Operations(kadm.OpWrite, kadm.OpDescribe, kadm.OpCreate),
		allow().Groups(group).Operations(kadm.OpRead, kadm.OpDescribe),
	}
}

// Provision creates (or resets) a SCRAM-SHA-512 user per service, named
// prefix + service, with a fresh random password, and grants it the
// service's ACLs under prefix. adm must be a super user's (or hold ALTER
// on the cluster). It returns the credentials by service name.
func Provision(ctx context.Context, adm *kadm.Client, prefix string) (map[string]Credential, error) {
	creds := map[string]Credential{}
	var upserts []kadm.UpsertSCRAM
	for _, s := range Services {
		pw, err := password()
		if err != nil {
			return nil, err
		}
		c := Credential{User: prefix + s.Name, Password: pw}
		creds[s.Name] = c
		upserts = append(upserts, kadm.UpsertSCRAM{User: c.User, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: pw})
	}
	res, err := adm.AlterUserSCRAMs(ctx, nil, upserts)
	if err != nil {
		return nil, fmt.Errorf("create the services' SCRAM users: %w", err)
	}
	for _, r := range res {
		if r.Err != nil {
			return nil, fmt.Errorf("create SCRAM user %s: %w", r.User, r.Err)
		}
	}
	for _, s := range Services {
		for _, b := range s.ACLs(prefix, creds[s.Name].User) {
			rs, err := adm.CreateACLs(ctx, b)
			if err != nil {
				return nil, fmt.Errorf("ACLs of %s: %w", s.Name, err)
			}
			for _, r := range rs {
				if r.Err != nil {
					return nil, fmt.Errorf("ACL %s %v on %s: %w %s", r.Principal, r.Operation, r.Name, r.Err, r.ErrMessage)
				}
			}
		}
	}
	return creds, nil
}

// Revoke deletes what Provision(prefix) created: the users and every ACL
// naming them.
func Revoke(ctx context.Context, adm *kadm.Client, prefix string) error {
	var errs []error
	var dels []kadm.DeleteSCRAM
	for _, s := range Services {
		user := prefix + s.Name
		dels = append(dels, kadm.DeleteSCRAM{User: user, Mechanism: kadm.ScramSha512})
		b := kadm.NewACLs().Allow("User:" + user).AllowHosts().AnyResource().Operations(kadm.OpAny).
			ResourcePatternType(kadm.ACLPatternAny)
		if _, err := adm.DeleteACLs(ctx, b); err != nil {
			errs = append(errs, fmt.Errorf("delete the ACLs of %s: %w", user, err))
		}
	}
	res, err := adm.AlterUserSCRAMs(ctx, dels, nil)
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range res {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("delete SCRAM user %s: %w", r.User, r.Err))
		}
	}
	return errors.Join(errs...)
}

// Connections gives each service its own principal on base's cluster when
// base authenticates with SASL (Provision under prefix; base's principal
// must be a super user) and returns each service's connection and a
// function deleting the principals. Without SASL every service gets base
// and there is nothing to delete.
func Connections(ctx context.Context, adm *kadm.Client, base kit.KafkaConfig, prefix string) (func(service string) kit.KafkaConfig, func(context.Context) error, error) {
	if base.SASLMechanism == "" {
		return func(string) kit.KafkaConfig { return base }, func(context.Context) error { return nil }, nil
	}
	creds, err := Provision(ctx, adm, prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("provision the services' Kafka principals (as %s, which must be a super user): %w", base.SASLUser, err)
	}
	of := func(service string) kit.KafkaConfig {
		c := creds[service]
		return base.As(c.User, c.Password)
	}
	return of, func(ctx context.Context) error { return Revoke(ctx, adm, prefix) }, nil
}

func password() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func topics(types ...contract.Type) []string {
	var out []string
	for _, t := range types {
		out = append(out, t.Topic())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func union(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}
