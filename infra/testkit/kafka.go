package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	tckafka "github.com/testcontainers/testcontainers-go/modules/kafka"

	"github.com/concordhq/concord/infra/kit"
)

// Kafka is a cluster tests can use. Kind says which: "env", "testcontainers",
// "kfake" or "private".
type Kafka struct {
	Brokers []string
	Kind    string
	// security is the TLS and SASL part of the connection: the shared
	// stack's authenticated listener as CONCORD_KAFKA_* give it; none for
	// the fakes and the private brokers.
	security kit.KafkaConfig
}

// Config is the connection to the cluster, its TLS and SASL included: what
// a client built by the code under test needs.
func (k *Kafka) Config() kit.KafkaConfig {
	c := k.security
	c.Brokers = k.Brokers
	return c
}

// As is the same cluster reached as another SASL principal (a service's
// own); without SASL it is k.
func (k *Kafka) As(user, password string) *Kafka {
	c := *k
	c.security = k.security.As(user, password)
	return &c
}

// Env is the connection as CONCORD_KAFKA_* variables for a child process;
// every one is set, so a child of a test on a private broker does not
// inherit the shared stack's TLS and SASL settings.
func (k *Kafka) Env() []string { return k.Config().Env() }

var (
	sharedOnce  sync.Once
	sharedKafka *Kafka
	sharedErr   string
)

// InCI reports whether the tests run under CI (CI=true), where fallbacks to
// fakes are refused.
func InCI() bool { v := os.Getenv("CI"); return v == "true" || v == "1" }

// KafkaFromEnv picks the cluster as the package doc says; it returns a
// reason instead of a cluster when none may be used.
func KafkaFromEnv(ci bool, brokers string, dockerUp func() bool) (kind string, refuse string) {
	switch {
	case strings.TrimSpace(brokers) != "":
		return "env", ""
	case ci:
		return "", "CI=true but CONCORD_KAFKA_BROKERS is not set: integration tests need the real broker (run `make test`, which starts it); refusing to fall back to kfake"
	case dockerUp():
		return "testcontainers", ""
	default:
		return "kfake", ""
	}
}

// BrokersFromEnv is CONCORD_KAFKA_BROKERS, else the older KAFKA_BROKERS.
func BrokersFromEnv() string {
	if v := os.Getenv("CONCORD_KAFKA_BROKERS"); v != "" {
		return v
	}
	return os.Getenv("KAFKA_BROKERS")
}

// NewKafka returns the shared cluster for this test binary.
func NewKafka(t testing.TB) *Kafka {
	t.Helper()
	sharedOnce.Do(func() {
		kind, refuse := KafkaFromEnv(InCI(), BrokersFromEnv(), dockerRunning)
		if refuse != "" {
			sharedErr = refuse
			return
		}
		switch kind {
		case "env":
			sec := kit.KafkaConfigFromEnv()
			sharedKafka = &Kafka{Brokers: splitList(BrokersFromEnv()), Kind: kind, security: sec}
		case "testcontainers":
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			c, err := tckafka.Run(ctx, "confluentinc/confluent-local:7.5.0", tckafka.WithClusterID("concord-test"))
			if err != nil {
				sharedErr = "testcontainers kafka: " + err.Error()
				return
			}
			b, err := c.Brokers(ctx)
			if err != nil {
				sharedErr = "testcontainers kafka brokers: " + err.Error()
				return
			}
			sharedKafka = &Kafka{Brokers: b, Kind: kind}
		case "kfake":
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(1))
			if err != nil {
				sharedErr = "kfake: " + err.Error()
				return
			}
			sharedKafka = &Kafka{Brokers: c.ListenAddrs(), Kind: kind}
		}
	})
	if sharedErr != "" {
		t.Fatal(sharedErr)
	}
	if sharedKafka.Kind == "kfake" {
		t.Log("testkit: no CONCORD_KAFKA_BROKERS and no Docker: using franz-go's in-process kfake, not a real broker")
	}
	return sharedKafka
}

func dockerRunning() bool {
	if _, err := exec.LookPath("docker"); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "docker", "info").Run() == nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Client returns a franz-go client for the cluster, closed when the test ends.
func (k *Kafka) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base, err := k.Config().Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client for the cluster, closed when the test ends.
func (k *Kafka) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(k.Client(t))
}

// CreateTopic creates a uniquely named topic with the given partitions and
// deletes it when the test ends.
func (k *Kafka) CreateTopic(t testing.TB, prefix string, partitions int32) string {
	t.Helper()
	name := UniqueName(t, prefix)
	adm := k.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	// Registered after Admin's own cleanup, so it runs first, while the
	// admin client is still open.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, name)
	})
	return name
}

// ClientProperties writes the connection's security as a Java client
// properties file (Apache's tools take it as --command-config) and
// returns its path; "" when the connection has neither TLS nor SASL.
func (k *Kafka) ClientProperties(t testing.TB) string {
	t.Helper()
	c := k.Config()
	if !c.TLS && c.SASLMechanism == "" {
		return ""
	}
	var b strings.Builder
	protocol := map[[2]bool]string{{true, true}: "SASL_SSL", {false, true}: "SASL_PLAINTEXT", {true, false}: "SSL"}[[2]bool{c.TLS, c.SASLMechanism != ""}]
	fmt.Fprintf(&b, "security.protocol=%s\n", protocol)
	if c.SASLMechanism != "" {
		module := "org.apache.kafka.common.security.scram.ScramLoginModule"
		if strings.EqualFold(c.SASLMechanism, "PLAIN") {
			module = "org.apache.kafka.common.security.plain.PlainLoginModule"
		}
		fmt.Fprintf(&b, "sasl.mechanism=%s\nsasl.jaas.config=%s required username=%q password=%q;\n",
			strings.ToUpper(c.SASLMechanism), module, c.SASLUser, c.SASLPassword)
	}
	if c.TLSCAFile != "" {
		fmt.Fprintf(&b, "ssl.truststore.type=PEM\nssl.truststore.location=%s\n", c.TLSCAFile)
	}
	path := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
