package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PrivatePostgres is a PostgreSQL server of the test's own, on a free port,
// that the test may stop, kill and restart.
type PrivatePostgres struct {
	URL  string // admin URL (database postgres)
	Port int
	proc *process
}

// NewPrivatePostgres initialises and starts a private server; it is removed
// when the test ends. It needs the server binaries (CONCORD_PG_BIN or
// /usr/lib/postgresql/*/bin), which infra/local/up installs.
func NewPrivatePostgres(t testing.TB) *PrivatePostgres {
	t.Helper()
	bin := os.Getenv("CONCORD_PG_BIN")
	if bin == "" {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Strings(dirs)
		if len(dirs) == 0 {
			t.Fatal("no PostgreSQL server binaries: run infra/local/up (it installs them) or set CONCORD_PG_BIN")
		}
		bin = dirs[len(dirs)-1]
	}
	cred, uid, gid, err := postgresCredential()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "concord-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	p := &PrivatePostgres{
		Port: port,
		URL:  fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		proc: &process{
			name: "postgres",
			argv: []string{filepath.Join(bin, "postgres"), "-D", data, "-p", fmt.Sprint(port), "-k", dir,
				"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200"},
			log:  filepath.Join(dir, "postgres.log"),
			cred: cred,
		},
	}
	t.Cleanup(func() { _ = p.proc.signal(syscall.SIGKILL, 10*time.Second) })
	p.Start(t)
	return p
}

// Start starts (or restarts) the server and waits until it accepts connections.
func (p *PrivatePostgres) Start(t testing.TB) {
	t.Helper()
	if err := p.proc.start(); err != nil {
		t.Fatal(err)
	}
	err := waitFor(60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, p.URL)
		if err != nil {
			return err
		}
		return c.Close(ctx)
	})
	if err != nil {
		t.Fatalf("private postgres did not come up: %v (log %s)", err, p.proc.log)
	}
}

// Stop shuts the server down fast (SIGINT: aborts sessions, clean checkpoint).
func (p *PrivatePostgres) Stop(t testing.TB) {
	t.Helper()
	if err := p.proc.signal(syscall.SIGINT, 30*time.Second); err != nil {
		t.Log(err)
	}
}

// Kill kills the server with SIGKILL, as a crash would.
func (p *PrivatePostgres) Kill(t testing.TB) {
	t.Helper()
	_ = p.proc.signal(syscall.SIGKILL, 10*time.Second)
}

// PrivateKafka is a single-node KRaft broker of the test's own, on free
// ports, that the test may stop, kill and restart with its data kept.
type PrivateKafka struct {
	Brokers []string
	proc    *process
}

// NewPrivateKafka formats and starts a private broker from the jars that
// infra/local/up resolved (CONCORD_KAFKA_CLASSPATH); it is removed when the
// test ends. Start-up takes a few seconds.
func NewPrivateKafka(t testing.TB) *PrivateKafka {
	t.Helper()
	cp := os.Getenv("CONCORD_KAFKA_CLASSPATH")
	if cp == "" {
		t.Fatal("CONCORD_KAFKA_CLASSPATH is not set: run the tests with `make test` (infra/local/up resolves the broker jars and sets it)")
	}
	dir := t.TempDir()
	port, cport := freePort(t), freePort(t)
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:%[2]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%[3]s/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
`, port, cport, dir)
	cfg := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(cfg, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	java := func(args ...string) []string {
		return append([]string{"java", "-Xms256m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-Dkafka.logs.dir=" + dir, "-cp", cp}, args...)
	}
	format := java("kafka.tools.StorageTool", "format", "--standalone", "-t", "concord-private-test1", "-c", cfg)
	if out, err := exec.Command(format[0], format[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("kafka storage format: %v\n%s", err, out)
	}
	k := &PrivateKafka{
		Brokers: []string{fmt.Sprintf("127.0.0.1:%d", port)},
		proc:    &process{name: "kafka", argv: java("kafka.Kafka", cfg), log: filepath.Join(dir, "stdout.log")},
	}
	t.Cleanup(func() { _ = k.proc.signal(syscall.SIGKILL, 10*time.Second) })
	k.Start(t)
	return k
}

// Kafka returns the broker as a *Kafka usable with the shared helpers.
func (k *PrivateKafka) Kafka() *Kafka { return &Kafka{Brokers: k.Brokers, Kind: "private"} }

// Start starts (or restarts) the broker and waits until it answers metadata.
func (k *PrivateKafka) Start(t testing.TB) {
	t.Helper()
	if err := k.proc.start(); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	err = waitFor(90*time.Second, func() error {
		if !k.proc.running() {
			return fmt.Errorf("broker exited")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		md, err := adm.BrokerMetadata(ctx)
		if err == nil && len(md.Brokers) == 0 {
			err = fmt.Errorf("no brokers in metadata")
		}
		return err
	})
	if err != nil {
		out, _ := os.ReadFile(k.proc.log)
		t.Fatalf("private kafka did not come up: %v\n%s", err, tail(string(out), 3000))
	}
}

// Stop shuts the broker down cleanly (SIGTERM).
func (k *PrivateKafka) Stop(t testing.TB) {
	t.Helper()
	if err := k.proc.signal(syscall.SIGTERM, 60*time.Second); err != nil {
		t.Log(err)
	}
}

// Kill kills the broker with SIGKILL.
func (k *PrivateKafka) Kill(t testing.TB) {
	t.Helper()
	_ = k.proc.signal(syscall.SIGKILL, 10*time.Second)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[strings.LastIndex(s[:len(s)-n], "\n")+1:]
}
