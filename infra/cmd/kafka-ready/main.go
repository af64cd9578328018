// Command kafka-ready exits 0 once a Kafka cluster answers a metadata
// request and 1 if it does not within --timeout. infra/local/up uses it to
// wait for the broker it started.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/concordhq/concord/infra/kit"
)

func main() { kit.Main("kafka-ready", run) }

func run(ctx context.Context, args []string) error {
	fs := kit.NewFlagSet("kafka-ready", "kafka-ready exits 0 once the Kafka cluster answers a metadata request, 1 if it does not within --timeout.")
	kf := kit.AddKafkaFlags(fs)
	// Older scripts pass -brokers.
	fs.Alias("brokers", "kafka-brokers")
	timeout := fs.Duration("timeout", "", 5*time.Second, "how long to wait for an answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return kit.Usagef("unexpected argument %q", fs.Arg(0))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cfg := kf.Config()
	cl, err := kit.NewKafkaClient(ctx, cfg, nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) == 0 {
		return fmt.Errorf("%s: no metadata: %v", *kf.Brokers, err)
	}
	fmt.Fprintf(os.Stdout, "kafka ready: %d broker(s), controller %d\n", len(md.Brokers), md.Controller)
	return nil
}
