package schemas_test

import (
	"errors"
	"testing"

	"github.com/concordhq/concord/schemas"
)

// TestSubjectNamesFollowConfluentsStrategies: the subject of a value schema
// as Confluent's serializers compute it under each strategy.
func TestSubjectNamesFollowConfluentsStrategies(t *testing.T) {
	for _, tc := range []struct {
		strategy, record, want string
	}{
		{"", "", "order-events-value"},
		{"TopicNameStrategy", "OrderCreated", "order-events-value"},
		{"io.confluent.kafka.serializers.subject.TopicNameStrategy", "OrderCreated", "order-events-value"},
		{"RecordNameStrategy", "OrderCreated", "OrderCreated"},
		{"TopicRecordNameStrategy", "OrderCreated", "order-events-OrderCreated"},
		{"io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", "concord.AccountDebited", "order-events-concord.AccountDebited"},
	} {
		s, err := schemas.ParseSubjectStrategy(tc.strategy)
		if err != nil {
			t.Fatalf("%q: %v", tc.strategy, err)
		}
		if got := schemas.SubjectName(s, "order-events", tc.record); got != tc.want {
			t.Errorf("%s with record %q: subject %q, want %q", tc.strategy, tc.record, got, tc.want)
		}
	}
	if _, err := schemas.ParseSubjectStrategy("TopicTypeStrategy"); err == nil {
		t.Error("an unknown strategy was accepted")
	}
}

// TestRecordNameIsTheTitleOrTheAvroFullName: what RecordNameStrategy reads
// from each kind of schema, and the error when there is nothing to read.
func TestRecordNameIsTheTitleOrTheAvroFullName(t *testing.T) {
	for _, tc := range []struct {
		encoding, schema, want string
	}{
		{schemas.EncodingJSON, `{"title":"OrderCreated","type":"object"}`, "OrderCreated"},
		{schemas.EncodingAvro, `{"type":"record","name":"AccountDebited","namespace":"concord.events","fields":[]}`, "concord.events.AccountDebited"},
		{schemas.EncodingAvro, `{"type":"record","name":"a.b.C","namespace":"ignored","fields":[]}`, "a.b.C"},
		{schemas.EncodingAvro, `{"type":"enum","name":"Status","symbols":["A"]}`, "Status"},
	} {
		got, err := schemas.RecordName(tc.encoding, []byte(tc.schema))
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.schema, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ encoding, schema string }{
		{schemas.EncodingJSON, `{"type":"object"}`},
		{schemas.EncodingJSON, `{"title":""}`},
		{schemas.EncodingAvro, `"string"`},
		{schemas.EncodingAvro, `{"type":"array","items":"string"}`},
	} {
		if _, err := schemas.RecordName(tc.encoding, []byte(tc.schema)); err == nil || (tc.schema != `"string"` && !errors.Is(err, schemas.ErrNoRecordName)) {
			t.Errorf("%s: err %v, want ErrNoRecordName", tc.schema, err)
		}
	}
}

// TestCatalogSubjectsPerEntry: every type of the embedded catalog has the
// subject its entry's strategy gives it, and types sharing a topic do not
// share a subject.
func TestCatalogSubjectsPerEntry(t *testing.T) {
	cat := schemas.MustDefault()
	want := map[string]string{
		"account.debited": "account-events-value",
		"order.created":   "order-events-OrderCreated",
		"payment.failed":  "payment-events-PaymentFailed",
	}
	seen := map[string]string{}
	for _, typ := range cat.Types() {
		e, _ := cat.Lookup(typ)
		for _, v := range e.Versions {
			s, err := cat.Subject(typ, v)
			if err != nil {
				t.Fatalf("%s v%d: %v", typ, v, err)
			}
			if w, ok := want[typ]; ok && s != w {
				t.Errorf("%s v%d: subject %q, want %q", typ, v, s, w)
			}
			if other, ok := seen[s]; ok && other != typ {
				t.Errorf("%s and %s share subject %q", typ, other, s)
			}
			seen[s] = typ
		}
	}
}
