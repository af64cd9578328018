// Command kafka-ready exits 0 once a Kafka cluster answers a metadata
// request and 1 if it does not within --timeout. infra/local/up uses it to
// wait for the broker it started.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/concordhq/concord/infra/kit"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:19092", "comma-separated bootstrap brokers")
	timeout := flag.Duration("timeout", 5*time.Second, "how long to wait for an answer")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kit.SplitBrokers(*brokers)...))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafka-ready:", err)
		os.Exit(1)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) == 0 {
		fmt.Fprintf(os.Stderr, "kafka-ready: %s: no metadata: %v\n", *brokers, err)
		os.Exit(1)
	}
	fmt.Printf("kafka ready: %d broker(s), controller %d\n", len(md.Brokers), md.Controller)
}
