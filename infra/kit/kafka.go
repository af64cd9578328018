package kit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// KafkaFlags are the connection flags of every binary that talks to Kafka.
type KafkaFlags struct {
	Brokers       *string
	TLS           *bool
	TLSCAFile     *string
	SASLMechanism *string
	SASLUser      *string
	SASLPassword  *string
}

// AddKafkaFlags registers --kafka-brokers and the TLS / SASL options.
func AddKafkaFlags(fs *FlagSet) KafkaFlags {
	return KafkaFlags{
		Brokers:       fs.String("kafka-brokers", "KAFKA_BROKERS", "127.0.0.1:19092", "comma-separated Kafka bootstrap brokers"),
		TLS:           fs.Bool("kafka-tls", "KAFKA_TLS", false, "connect to Kafka over TLS"),
		TLSCAFile:     fs.String("kafka-tls-ca", "KAFKA_TLS_CA", "", "PEM file of CAs to trust for Kafka TLS (system roots when empty)"),
		SASLMechanism: fs.String("kafka-sasl-mechanism", "KAFKA_SASL_MECHANISM", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (none when empty)"),
		SASLUser:      fs.String("kafka-sasl-user", "KAFKA_SASL_USER", "", "SASL user name"),
		SASLPassword:  fs.String("kafka-sasl-password", "KAFKA_SASL_PASSWORD", "", "SASL password"),
	}
}

// KafkaConfig is what a franz-go client needs to reach the cluster.
type KafkaConfig struct {
	Brokers       []string
	TLS           bool
	TLSCAFile     string
	SASLMechanism string
	SASLUser      string
	SASLPassword  string
}

// Config turns the parsed flags into a KafkaConfig.
func (f KafkaFlags) Config() KafkaConfig {
	return KafkaConfig{
		Brokers: SplitBrokers(*f.Brokers), TLS: *f.TLS, TLSCAFile: *f.TLSCAFile,
		SASLMechanism: *f.SASLMechanism, SASLUser: *f.SASLUser, SASLPassword: *f.SASLPassword,
	}
}

// SplitBrokers splits a comma-separated broker list, dropping blanks.
func SplitBrokers(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// KafkaConfigFromEnv reads the connection from the CONCORD_KAFKA_*
// variables that the binaries' flags fall back to, for code that takes no
// flags (tests, their helpers). A malformed CONCORD_KAFKA_TLS reads as off.
func KafkaConfigFromEnv() KafkaConfig {
	tlsOn, _ := strconv.ParseBool(os.Getenv("CONCORD_KAFKA_TLS"))
	return KafkaConfig{
		Brokers: SplitBrokers(os.Getenv("CONCORD_KAFKA_BROKERS")), TLS: tlsOn, TLSCAFile: os.Getenv("CONCORD_KAFKA_TLS_CA"),
		SASLMechanism: os.Getenv("CONCORD_KAFKA_SASL_MECHANISM"),
		SASLUser:      os.Getenv("CONCORD_KAFKA_SASL_USER"), SASLPassword: os.Getenv("CONCORD_KAFKA_SASL_PASSWORD"),
	}
}

// Env is the connection as CONCORD_KAFKA_* variables for a child process.
// Every variable is set, empty ones included, so a child never mixes this
// connection with its parent's (a private plaintext broker with the shared
// stack's TLS and SASL settings).
func (c KafkaConfig) Env() []string {
	return []string{
		"CONCORD_KAFKA_BROKERS=" + strings.Join(c.Brokers, ","),
		"CONCORD_KAFKA_TLS=" + strconv.FormatBool(c.TLS),
		"CONCORD_KAFKA_TLS_CA=" + c.TLSCAFile,
		"CONCORD_KAFKA_SASL_MECHANISM=" + c.SASLMechanism,
		"CONCORD_KAFKA_SASL_USER=" + c.SASLUser,
		"CONCORD_KAFKA_SASL_PASSWORD=" + c.SASLPassword,
	}
}

// As is the same connection authenticated as another SASL principal (each
// service has its own on an authenticated cluster). Without SASL it is c.
func (c KafkaConfig) As(user, password string) KafkaConfig {
	if c.SASLMechanism == "" {
		return c
	}
	c.SASLUser, c.SASLPassword = user, password
	return c
}

// Opts returns the franz-go options for the connection: seeds, TLS, SASL.
// Callers append the producer or consumer options of their own.
func (c KafkaConfig) Opts() ([]kgo.Opt, error) {
	if len(c.Brokers) == 0 {
		return nil, fmt.Errorf("no Kafka brokers configured")
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...)}
	if c.TLS {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.TLSCAFile != "" {
			pem, err := os.ReadFile(c.TLSCAFile)
			if err != nil {
				return nil, fmt.Errorf("kafka TLS CA: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("kafka TLS CA %s: no certificates found", c.TLSCAFile)
			}
			cfg.RootCAs = pool
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if c.SASLMechanism != "" {
		m, err := c.sasl()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (c KafkaConfig) sasl() (sasl.Mechanism, error) {
	switch strings.ToUpper(c.SASLMechanism) {
	case "PLAIN":
		return plain.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: c.SASLUser, Pass: c.SASLPassword}.AsSha512Mechanism(), nil
	default:
		return nil, fmt.Errorf("kafka SASL mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASLMechanism)
	}
}

// NewKafkaClient builds a franz-go client from the config plus extra options
// and checks that the cluster answers before returning it.
func NewKafkaClient(ctx context.Context, c KafkaConfig, log *slog.Logger, extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := c.Opts()
	if err != nil {
		return nil, err
	}
	if log != nil {
		opts = append(opts, kgo.WithLogger(kslog{log}))
	}
	if o, ok := kafkaTracing(); ok {
		opts = append(opts, o)
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka at %s does not answer: %w", strings.Join(c.Brokers, ","), err)
	}
	return cl, nil
}

// kslog adapts slog to franz-go's logger at warn level and above: the
// client's info logs are per-connection chatter.
type kslog struct{ l *slog.Logger }

func (k kslog) Level() kgo.LogLevel { return kgo.LogLevelWarn }
func (k kslog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, keyvals...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, keyvals...)
	default:
		k.l.Debug(msg, keyvals...)
	}
}
