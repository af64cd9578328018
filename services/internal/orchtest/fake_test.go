package orchtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

// answer is how a fake participant answers one receipt of a command.
type answer int

const (
	ok        answer = iota // apply and reply succeeded
	refuse                  // reply failed (not retryable), no effect
	retryable               // reply failed, retryable, no effect
	silent                  // no reply, no effect
	hold                    // apply later: the reply waits until release
)

// plan scripts one saga: command type → the answer to its n-th receipt
// (1-based; receipts past the list get ok).
type plan map[contract.Type][]answer

// command is what the fakes read of any saga command.
type command struct {
	SagaID         string `json:"saga_id"`
	Step           string `json:"step"`
	IdempotencyKey string `json:"idempotency_key"`
	Attempt        int    `json:"attempt"`
}

// participants is the fake payment, inventory and shipping services: one
// consumer of the three command topics that applies each command's
// effect at most once per idempotency key and replies on saga-replies,
// the same reply again for a repeated command.
type participants struct {
	t      *testing.T
	cl     *kgo.Client
	writer outbox.Writer

	mu       sync.Mutex
	plans    map[string]plan
	receipts map[string]int             // key → receipts
	ids      map[string]map[string]bool // key → distinct command event ids
	applied  map[string]int             // key → effects applied
	replied  map[string]contract.SagaStepRepliedV1
	types    map[string]contract.Type // key → command type
	held     []heldReply
	holding  bool
	dupReply bool // send every reply twice (two event ids)
}

type heldReply struct {
	key string
	r   contract.SagaStepRepliedV1
}

// newParticipants consumes the command topics of the participants it
// fakes (payment, inventory, shipping: all when none are named).
func newParticipants(t *testing.T, k *testkit.Kafka, prefix string, fake ...string) *participants {
	t.Helper()
	p := &participants{t: t, writer: outbox.Writer{TopicPrefix: prefix}, plans: map[string]plan{}, receipts: map[string]int{},
		ids: map[string]map[string]bool{}, applied: map[string]int{}, replied: map[string]contract.SagaStepRepliedV1{}, types: map[string]contract.Type{}}
	if len(fake) == 0 {
		fake = []string{"payment", "inventory", "shipping"}
	}
	var topics []string
	for _, f := range fake {
		topics = append(topics, prefix+f+"-commands")
	}
	conn, err := k.Config().Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(conn, kgo.ConsumerGroup(prefix+"fakes"),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50e6))...)
	if err != nil {
		t.Fatal(err)
	}
	p.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			fs.EachRecord(func(r *kgo.Record) { p.receive(ctx, r) })
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return p
}

func (p *participants) script(sagaID string, pl plan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plans[sagaID] = pl
}

func (p *participants) receive(ctx context.Context, rec *kgo.Record) {
	env, err := schemas.DecodeEnvelope(rec.Value)
	if err != nil {
		p.t.Errorf("fake participant: %v", err)
		return
	}
	var c command
	if err := json.Unmarshal(env.Data, &c); err != nil {
		p.t.Errorf("fake participant: %s: %v", env.EventType, err)
		return
	}
	typ := contract.Type(env.EventType)
	p.mu.Lock()
	p.receipts[c.IdempotencyKey]++
	n := p.receipts[c.IdempotencyKey]
	if p.ids[c.IdempotencyKey] == nil {
		p.ids[c.IdempotencyKey] = map[string]bool{}
	}
	p.ids[c.IdempotencyKey][env.EventID] = true
	p.types[c.IdempotencyKey] = typ
	r, done := p.replied[c.IdempotencyKey] // a repeat gets the first answer, naming the first command
	if !done {
		a := ok
		if as := p.plans[c.SagaID][typ]; n <= len(as) {
			a = as[n-1]
		}
		r = contract.SagaStepRepliedV1{SagaID: c.SagaID, Step: c.Step, CommandType: contract.SagaStepRepliedV1CommandType(typ),
			CommandID: env.EventID, IdempotencyKey: c.IdempotencyKey, Outcome: contract.SagaStepRepliedV1OutcomeSucceeded}
		switch a {
		case silent:
			p.mu.Unlock()
			return
		case refuse, retryable:
			r.Outcome, r.Reason = contract.SagaStepRepliedV1OutcomeFailed, "scripted_refusal"
			if a == retryable {
				yes := true
				r.Retryable = &yes
			}
		case ok, hold:
			p.applied[c.IdempotencyKey]++
			switch typ {
			case contract.TypePaymentAuthorizeHold:
				r.ProviderPaymentID = "pi_" + c.SagaID
			case contract.TypeShippingCreateShipment:
				r.ShipmentID = "shp_" + c.SagaID
			}
			p.replied[c.IdempotencyKey] = r
			if a == hold || p.holding {
				p.held = append(p.held, heldReply{c.IdempotencyKey, r})
				p.mu.Unlock()
				return
			}
		}
	}
	dup := p.dupReply
	p.mu.Unlock()
	p.reply(ctx, r, env.EventID)
	if dup {
		p.reply(ctx, r, env.EventID)
	}
}

// reply produces r on saga-replies as its participant's outbox would.
func (p *participants) reply(ctx context.Context, r contract.SagaStepRepliedV1, causation string) {
	_, rec, err := p.writer.Prepare(outbox.Event{Payload: r, CausationID: causation})
	if err != nil {
		p.t.Errorf("fake reply: %v", err)
		return
	}
	if err := p.cl.ProduceSync(ctx, &kgo.Record{Topic: rec.Topic, Key: []byte(rec.PartitionKey), Value: rec.Payload}).FirstErr(); err != nil &&
		!errors.Is(err, context.Canceled) {
		p.t.Errorf("fake reply: %v", err)
	}
}

// holdAll makes every later success wait for release.
func (p *participants) holdAll(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding = on
}

// release sends the held replies.
func (p *participants) release(ctx context.Context) int {
	p.mu.Lock()
	held := p.held
	p.held = nil
	p.mu.Unlock()
	for _, h := range held {
		p.reply(ctx, h.r, h.r.CommandID)
	}
	return len(held)
}

func (p *participants) heldCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

// keysOf lists the keys of sagaID's commands received, as "type key".
func (p *participants) keysOf(sagaID string) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, n := range p.receipts {
		if len(k) > len(sagaID) && k[:len(sagaID)+1] == sagaID+":" {
			out[k] = n
		}
	}
	return out
}

// sends is how many distinct commands (event ids) carried key.
func (p *participants) sends(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ids[key])
}

func (p *participants) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("receipts %v", p.receipts)
}
