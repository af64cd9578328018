// Command crashconsumer is the consumer process the idempotent package's
// crash tests start and kill. It applies order events with a handler that
// inserts one effects row per application. With --crash-after-db-commit it
// SIGKILLs itself right after its first batch's database commit and before
// that batch's offsets are marked for commit: the window in which a real
// process dying leaves an effect committed and its offset not.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
)

func main() {
	kit.Main("crashconsumer", run)
}

func run(ctx context.Context, args []string) error {
	fs := kit.NewFlagSet("crashconsumer", "crashconsumer applies order events once each (an effects row per application); the idempotent package's crash tests start and kill it.")
	kf := kit.AddKafkaFlags(fs)
	dbURL := fs.String("database-url", "DATABASE_URL", "", "database of the dedupe and effects rows (required)")
	group := fs.String("group", "GROUP", "", "consumer group (required)")
	topic := fs.String("topic", "TOPIC", "", "topic to consume (required)")
	instance := fs.String("group-instance-id", "GROUP_INSTANCE_ID", "", "static group membership id; empty: a dynamic member")
	session := fs.Duration("group-session-timeout", "GROUP_SESSION_TIMEOUT", 6*time.Second, "how long the group waits for a silent member")
	crash := fs.Bool("crash-after-db-commit", "CRASH_AFTER_DB_COMMIT", false, "SIGKILL itself after the first batch's database commit, before its offsets are committed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := kit.Require("database-url", *dbURL, "group", *group, "topic", *topic); err != nil {
		return kit.UsageError{Err: err}
	}
	pool, err := kit.NewPool(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := idempotent.Config{
		Group:      *group,
		Topics:     []string{*topic},
		Pool:       pool,
		Kafka:      kf.Config(),
		Handler:    insertEffect,
		InstanceID: *instance,
		// A killed dynamic member holds its partitions until its session
		// expires; the default is short so the restarted consumer takes
		// over quickly.
		KafkaOpts: []kgo.Opt{kgo.SessionTimeout(*session), kgo.HeartbeatInterval(time.Second)},
	}
	if *crash {
		cfg.AfterDBCommit = func(topic string, partition int32, last int64) {
			fmt.Fprintf(os.Stderr, "crashconsumer: committed %s/%d through %d; SIGKILL before the offset commit\n", topic, partition, last)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way; never mark the offsets
		}
	}
	r, err := idempotent.NewRunner(cfg)
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

func insertEffect(ctx context.Context, tx pgx.Tx, ev idempotent.Event, _ outbox.Emitter) error {
	var d struct {
		Seq int `json:"seq"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return idempotent.Permanent(err)
	}
	_, err := tx.Exec(ctx, `INSERT INTO effects (event_id, key, seq, topic, partition, "offset") VALUES ($1,$2,$3,$4,$5,$6)`,
		ev.EventID, string(ev.Key), d.Seq, ev.Topic, ev.Partition, ev.Offset)
	return err
}
