package testkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit/proc"
)

// PrivatePostgres is a PostgreSQL server of the test's own, on a free port,
// that the test may stop, kill and restart.
type PrivatePostgres struct {
	URL  string // admin URL (database postgres)
	Port int
	dir  string // data directory, socket and log
	cmd  proc.Command
	proc *proc.Process
}

// NewPrivatePostgres initialises and starts a private server; it is removed
// when the test ends. It needs the server binaries (CONCORD_PG_BIN or
// /usr/lib/postgresql/*/bin), which infra/local/up installs.
func NewPrivatePostgres(t testing.TB) *PrivatePostgres {
	t.Helper()
	p, err := StartPrivatePostgres()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", p.cmd.Name, p.proc.LogTail(4000))
		}
		p.Close()
	})
	return p
}

// StartPrivatePostgres initialises and starts a private server outside any
// one test (see PackagePostgresURL); the caller removes it with Close.
func StartPrivatePostgres() (*PrivatePostgres, error) {
	bin := os.Getenv("CONCORD_PG_BIN")
	if bin == "" {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Strings(dirs)
		if len(dirs) == 0 {
			return nil, errors.New("no PostgreSQL server binaries: run infra/local/up (it installs them) or set CONCORD_PG_BIN")
		}
		bin = dirs[len(dirs)-1]
	}
	cred, uid, gid, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "concord-pg-")
	if err != nil {
		return nil, err
	}
	p := &PrivatePostgres{dir: dir}
	if err := p.initAndStart(bin, cred, uid, gid); err != nil {
		if p.proc != nil { // its log goes with its directory
			err = fmt.Errorf("%w\n%s", err, p.proc.LogTail(3000))
		}
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *PrivatePostgres) initAndStart(bin string, cred *syscall.Credential, uid, gid int) error {
	if uid >= 0 {
		if err := os.Chown(p.dir, uid, gid); err != nil {
			return err
		}
	}
	data := filepath.Join(p.dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	ports, err := kit.FreePorts(1)
	if err != nil {
		return err
	}
	p.Port = ports[0]
	p.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.Port)
	p.cmd = proc.Command{
		Name: "postgres",
		Path: filepath.Join(bin, "postgres"),
		Args: []string{"-D", data, "-p", fmt.Sprint(p.Port), "-k", p.dir,
			"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200",
			// The WAL relay's tests stream from a logical replication slot.
			"-c", "wal_level=logical"},
		Log:        filepath.Join(p.dir, "postgres.log"),
		Credential: cred,
	}
	if p.proc, err = proc.Run(p.cmd); err != nil {
		return err
	}
	return p.waitUp()
}

// Close kills the server and removes its files.
func (p *PrivatePostgres) Close() {
	if p.proc != nil {
		p.proc.Kill()
	}
	os.RemoveAll(p.dir)
}

// Start starts (or restarts) the server and waits until it accepts connections.
func (p *PrivatePostgres) Start(t testing.TB) {
	t.Helper()
	p.proc = startOrRestart(t, p.proc, p.cmd)
	if err := p.waitUp(); err != nil {
		t.Fatal(err)
	}
}

func (p *PrivatePostgres) waitUp() error {
	err := p.proc.WaitFor(context.Background(), 60*time.Second, "accepting connections", func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, p.URL)
		if err != nil {
			return err
		}
		return c.Close(ctx)
	})
	if err != nil {
		return fmt.Errorf("private postgres did not come up: %w", err)
	}
	return nil
}

// Stop shuts the server down fast (SIGINT: aborts sessions, clean checkpoint).
func (p *PrivatePostgres) Stop(t testing.TB) {
	t.Helper()
	if err := p.proc.Stop(syscall.SIGINT, 30*time.Second); err != nil {
		t.Log(err)
	}
}

// Kill kills the server with SIGKILL, as a crash would, and returns once
// its backends are gone too (see proc.Process.Kill).
func (p *PrivatePostgres) Kill(t testing.TB) {
	t.Helper()
	if err := p.proc.Kill(); err != nil {
		t.Fatal(err)
	}
}

// packagePostgres is the private server of PackagePostgresURL, started at
// its first call in a test binary and closed by MainWithPrivatePostgres.
var packagePostgres struct {
	mu      sync.Mutex
	inMain  bool
	started bool
	pg      *PrivatePostgres
	err     error
}

// MainWithPrivatePostgres is the TestMain of a package whose tests use
// PackagePostgresURL: it runs the tests, then removes the server if one
// was started.
func MainWithPrivatePostgres(m *testing.M) {
	packagePostgres.mu.Lock()
	packagePostgres.inMain = true
	packagePostgres.mu.Unlock()
	code := m.Run()
	packagePostgres.mu.Lock()
	if packagePostgres.pg != nil {
		packagePostgres.pg.Close()
	}
	packagePostgres.mu.Unlock()
	os.Exit(code)
}

// PackagePostgresURL returns the admin URL of a private server (wal_level
// logical) shared by the tests of one test binary, for tests that no other
// package's work on the shared server may delay: creating a logical
// replication slot waits until every transaction running on the whole
// server has ended, and the packages testing in parallel on the shared
// server hold theirs open for seconds. The tests of one package run one
// after the other (unless they call t.Parallel, which such tests must
// not), so a test sees no transactions on it but its own. Each test still
// takes a fresh database (NewDatabase). The package's TestMain must be
// MainWithPrivatePostgres.
func PackagePostgresURL(t testing.TB) string {
	t.Helper()
	packagePostgres.mu.Lock()
	defer packagePostgres.mu.Unlock()
	if !packagePostgres.inMain {
		t.Fatal("PackagePostgresURL needs the package's TestMain to be testkit.MainWithPrivatePostgres (it removes the server)")
	}
	if !packagePostgres.started {
		packagePostgres.started = true
		packagePostgres.pg, packagePostgres.err = StartPrivatePostgres()
	}
	if packagePostgres.err != nil {
		t.Fatal(packagePostgres.err)
	}
	return packagePostgres.pg.URL
}

// PrivateKafka is a single-node KRaft broker of the test's own, on free
// ports, that the test may stop, kill and restart with its data kept.
type PrivateKafka struct {
	Brokers []string
	cmd     proc.Command
	proc    *proc.Process
}

// NewPrivateKafka formats and starts a private broker from the jars that
// infra/local/up resolved (CONCORD_KAFKA_CLASSPATH); it is removed when the
// test ends. Start-up takes a few seconds.
func NewPrivateKafka(t testing.TB) *PrivateKafka {
	t.Helper()
	return NewPrivateKafkaCluster(t, 1).Nodes[0]
}

// PrivateKafkaCluster is a KRaft cluster of the test's own: every node a
// broker and a controller (static voters), topics replicated to every node
// (up to 3) with min.insync.replicas one less, so it keeps accepting acks=all
// writes with one node down.
type PrivateKafkaCluster struct {
	Brokers []string // every node's listener
	Nodes   []*PrivateKafka
}

// NewPrivateKafkaCluster formats and starts n nodes and waits until each
// answers metadata; they are removed when the test ends.
func NewPrivateKafkaCluster(t testing.TB, n int) *PrivateKafkaCluster {
	t.Helper()
	cp := os.Getenv("CONCORD_KAFKA_CLASSPATH")
	if cp == "" {
		t.Fatal("CONCORD_KAFKA_CLASSPATH is not set: run the tests with `make test` (infra/local/up resolves the broker jars and sets it)")
	}
	ports := freePorts(t, 2*n)
	rf := min(n, 3)
	var voters, bootstrap []string
	for i := range n {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[2*i+1]))
		bootstrap = append(bootstrap, fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]))
	}
	// One node formats with --standalone and bootstraps its quorum; more
	// name each other as static voters.
	quorum := "controller.quorum.bootstrap.servers=" + strings.Join(bootstrap, ",")
	if n > 1 {
		quorum = "controller.quorum.voters=" + strings.Join(voters, ",")
	}
	c := &PrivateKafkaCluster{}
	for i := range n {
		dir := t.TempDir()
		port, cport := ports[2*i], ports[2*i+1]
		props := fmt.Sprintf(`process.roles=broker,controller
node.id=%[4]d
%[5]s
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%[3]s/data
num.partitions=1
default.replication.factor=%[6]d
min.insync.replicas=%[7]d
offsets.topic.replication.factor=%[6]d
offsets.topic.num.partitions=4
share.coordinator.state.topic.replication.factor=%[6]d
share.coordinator.state.topic.min.isr=%[7]d
transaction.state.log.replication.factor=%[6]d
transaction.state.log.min.isr=%[7]d
group.initial.rebalance.delay.ms=0
`, port, cport, dir, i+1, quorum, rf, max(rf-1, 1))
		cfg := filepath.Join(dir, "server.properties")
		if err := os.WriteFile(cfg, []byte(props), 0o644); err != nil {
			t.Fatal(err)
		}
		java := func(args ...string) []string {
			return append([]string{"-Xms256m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
				"-Dkafka.logs.dir=" + dir, "-cp", cp}, args...)
		}
		format := java("kafka.tools.StorageTool", "format", "-t", "concord-private-test1", "-c", cfg)
		if n == 1 {
			format = append(format, "--standalone")
		}
		if out, err := exec.Command("java", format...).CombinedOutput(); err != nil {
			t.Fatalf("kafka storage format: %v\n%s", err, out)
		}
		k := &PrivateKafka{
			Brokers: []string{fmt.Sprintf("127.0.0.1:%d", port)},
			cmd: proc.Command{Name: fmt.Sprintf("kafka-%d", i+1), Path: "java", Args: java("kafka.Kafka", cfg),
				Log: filepath.Join(dir, "stdout.log")},
		}
		c.Nodes = append(c.Nodes, k)
		c.Brokers = append(c.Brokers, k.Brokers...)
	}
	// The nodes of a cluster wait for each other's quorum: start them
	// all, then wait for each.
	for _, k := range c.Nodes {
		k.proc = startOrRestart(t, k.proc, k.cmd)
	}
	for _, k := range c.Nodes {
		k.waitUp(t)
	}
	return c
}

// Kafka returns the cluster as a *Kafka usable with the shared helpers.
func (c *PrivateKafkaCluster) Kafka() *Kafka { return &Kafka{Brokers: c.Brokers, Kind: "private"} }

// Kafka returns the broker as a *Kafka usable with the shared helpers.
func (k *PrivateKafka) Kafka() *Kafka { return &Kafka{Brokers: k.Brokers, Kind: "private"} }

// ID is the node's node.id in its cluster (1 for a single broker).
func (k *PrivateKafka) ID() int32 {
	var id int32
	_, _ = fmt.Sscanf(k.cmd.Name, "kafka-%d", &id)
	return id
}

// Start starts (or restarts) the broker and waits until it answers metadata.
func (k *PrivateKafka) Start(t testing.TB) {
	t.Helper()
	k.proc = startOrRestart(t, k.proc, k.cmd)
	k.waitUp(t)
}

func (k *PrivateKafka) waitUp(t testing.TB) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	err = k.proc.WaitFor(context.Background(), 90*time.Second, "answering metadata", func(ctx context.Context) error {
		md, err := adm.BrokerMetadata(ctx)
		if err == nil && len(md.Brokers) == 0 {
			err = fmt.Errorf("no brokers in metadata")
		}
		return err
	})
	if err != nil {
		t.Fatalf("private kafka did not come up: %v\n%s", err, k.proc.LogTail(3000))
	}
}

// Stop shuts the broker down cleanly (SIGTERM).
func (k *PrivateKafka) Stop(t testing.TB) {
	t.Helper()
	if err := k.proc.Stop(syscall.SIGTERM, 60*time.Second); err != nil {
		t.Log(err)
	}
}

// Kill kills the broker with SIGKILL.
func (k *PrivateKafka) Kill(t testing.TB) {
	t.Helper()
	if err := k.proc.Kill(); err != nil {
		t.Fatal(err)
	}
}

// startOrRestart starts cmd the first time (killed when the test ends) and
// restarts p after that.
func startOrRestart(t testing.TB, p *proc.Process, cmd proc.Command) *proc.Process {
	t.Helper()
	if p == nil {
		return proc.Start(t, cmd)
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	return p
}

// freePorts returns n distinct free loopback ports.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := kit.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// postgresCredential returns the postgres user's credentials when running as
// root: the server refuses to run as root.
func postgresCredential() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, -1, -1, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("running as root needs a postgres user to run the server: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
}
