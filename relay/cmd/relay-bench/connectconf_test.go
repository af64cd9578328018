package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
)

func TestKafkaClientPropertiesFollowTheStacksSecurity(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     kit.KafkaConfig
		want    properties
		wantErr string
	}{
		{name: "plaintext", cfg: kit.KafkaConfig{Brokers: []string{"127.0.0.1:19094"}},
			want: properties{"bootstrap.servers": "127.0.0.1:19094", "security.protocol": "PLAINTEXT"}},
		{name: "TLS only", cfg: kit.KafkaConfig{Brokers: []string{"a:1", "b:2"}, TLS: true, TLSCAFile: "/ca.pem"},
			want: properties{"bootstrap.servers": "a:1,b:2", "security.protocol": "SSL",
				"ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem"}},
		{name: "SCRAM over TLS, a password needing quotes",
			cfg: kit.KafkaConfig{Brokers: []string{"a:1"}, TLS: true, TLSCAFile: "/ca.pem",
				SASLMechanism: "scram-sha-512", SASLUser: "admin", SASLPassword: `p"w\x`},
			want: properties{"bootstrap.servers": "a:1", "security.protocol": "SASL_SSL",
				"ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem", "sasl.mechanism": "SCRAM-SHA-512",
				"sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="p\"w\\x";`}},
		{name: "PLAIN without TLS", cfg: kit.KafkaConfig{Brokers: []string{"a:1"}, SASLMechanism: "PLAIN", SASLUser: "u", SASLPassword: "p"},
			want: properties{"bootstrap.servers": "a:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
				"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`}},
		{name: "unknown mechanism", cfg: kit.KafkaConfig{Brokers: []string{"a:1"}, SASLMechanism: "OAUTHBEARER"},
			wantErr: `kafka-sasl-mechanism "OAUTHBEARER"`},
		{name: "no brokers", cfg: kit.KafkaConfig{}, wantErr: "no Kafka brokers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := kafkaClientProperties(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want.String() {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestConnectWorkerGivesItsProducersAndAdminTheSameSecurity(t *testing.T) {
	cfg := kit.KafkaConfig{Brokers: []string{"a:1"}, TLS: true, TLSCAFile: "/ca.pem", SASLMechanism: "SCRAM-SHA-512", SASLUser: "u", SASLPassword: "p"}
	w, err := connectWorker(cfg, "/tmp/offsets", 8083)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"security.protocol", "sasl.mechanism", "sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.type"} {
		for _, prefix := range []string{"", "producer.", "admin."} {
			if w[prefix+k] == "" {
				t.Errorf("%s%s is not set", prefix, k)
			}
		}
	}
	if w["listeners"] != "http://127.0.0.1:8083" || w["offset.storage.file.filename"] != "/tmp/offsets" {
		t.Errorf("listeners %q, offsets %q", w["listeners"], w["offset.storage.file.filename"])
	}
}

func TestPropertiesEscapeBackslashes(t *testing.T) {
	got := properties{"b": `C:\x`, "a": "1"}.String()
	if want := "a=1\nb=C:\\\\x\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParsePeers(t *testing.T) {
	for _, tc := range []struct {
		list    string
		want    peerSet
		wantErr string
	}{
		{list: "poll,wal,debezium", want: peerSet{poll: true, wal: true, debezium: true}},
		{list: " debezium ", want: peerSet{debezium: true}},
		{list: "wal,", want: peerSet{wal: true}},
		{list: "poll,kafka", wantErr: `unknown peer "kafka"`},
		{list: "", wantErr: "none given"},
	} {
		got, err := parsePeers(tc.list)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parsePeers(%q) err = %v, want one containing %q", tc.list, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parsePeers(%q) = %+v, %v; want %+v", tc.list, got, err, tc.want)
		}
	}
}

func TestRecordDiffNamesEveryDifference(t *testing.T) {
	want := &kgo.Record{Key: []byte("k"), Value: []byte(`{"a":1}`), Headers: []kgo.RecordHeader{
		{Key: "event_id", Value: []byte("e1")}, {Key: "event_version", Value: []byte("1")}, {Key: "traceparent", Value: []byte("00-x")}}}
	same := &kgo.Record{Key: []byte("k"), Value: []byte(`{"a":1}`), Headers: []kgo.RecordHeader{
		{Key: "traceparent", Value: []byte("00-x")}, {Key: "event_version", Value: []byte("1")}, {Key: "event_id", Value: []byte("e1")}}}
	if d := recordDiff(want, same); len(d) != 0 {
		t.Errorf("headers in another order: %v, want no difference", d)
	}
	got := &kgo.Record{Key: []byte("k2"), Value: []byte(`{"a": 1}`), Headers: []kgo.RecordHeader{
		{Key: "event_id", Value: []byte("e1")}, {Key: "event_version", Value: []byte("2")}, {Key: "id", Value: []byte("e1")}}}
	wantDiff := []string{"extra header id", "header event_version differs", "header traceparent missing", "key differs", "value differs"}
	if d := recordDiff(want, got); !slices.Equal(d, wantDiff) {
		t.Errorf("got %v, want %v", d, wantDiff)
	}
}

func TestAppendLogNotesARecordOnAnotherPartitionThanConcordsRelayWould(t *testing.T) {
	row := outbox.Record{EventID: "e1", PartitionKey: "order-42", EventType: "order.placed", EventVersion: 2, Payload: []byte(`{}`)}
	concord := kafkaRecord(row)
	p := int32(kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(concord, 6))
	for _, tc := range []struct {
		partition int32
		want      []string
	}{
		{partition: p},
		{partition: (p + 1) % 6, want: []string{"partition differs"}},
	} {
		log := newAppendLog(map[string]outbox.Record{"e1": row}, 6)
		got := *concord
		got.Partition, got.Timestamp = tc.partition, time.Now()
		log.add(&got)
		if !slices.Equal(log.mismatches, tc.want) || log.count() != 1 {
			t.Errorf("partition %d (Concord's %d): mismatches %v, count %d; want %v, 1", tc.partition, p, log.mismatches, log.count(), tc.want)
		}
	}
}

func TestTheConnectorReadsTheDatabaseURLAsPgxDoes(t *testing.T) {
	// What the URLs leave out would come from these.
	for _, v := range []string{"PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGSERVICE"} {
		t.Setenv(v, "")
	}
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	for _, tc := range []struct {
		url     string
		want    dbTarget
		wantErr string
	}{
		{url: "postgres://concord:s%40cret@127.0.0.1:55432/bench?sslmode=disable",
			want: dbTarget{host: "127.0.0.1", port: "55432", user: "concord", password: "s@cret", name: "bench"}},
		{url: "host=db.internal port=6432 user=relay password='a b' dbname=outbox sslmode=disable",
			want: dbTarget{host: "db.internal", port: "6432", user: "relay", password: "a b", name: "outbox"}},
		{url: "postgres://relay@db.internal/outbox?sslmode=disable",
			want: dbTarget{host: "db.internal", port: "5432", user: "relay", name: "outbox"}},
		{url: "postgres:///outbox?host=/var/run/postgresql&user=relay", wantErr: "Unix socket"},
		{url: "postgres://relay@db.internal:notaport/outbox", wantErr: "database URL"},
	} {
		got, err := parseDBTarget(tc.url)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseDBTarget(%q) = %+v, %v; want an error with %q", tc.url, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseDBTarget(%q) = %+v, %v; want %+v", tc.url, got, err, tc.want)
		}
	}
}
