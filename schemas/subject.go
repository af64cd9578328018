package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// Subject name strategies, as Confluent's serializers name them
// (io.confluent.kafka.serializers.subject.*). The strategy decides under
// which registry subject a producer's serializer looks its schema up, so
// it must be the one the registry push used.
const (
	// TopicNameStrategy: <topic>-value. One schema lineage per topic, so a
	// topic carrying several event types cannot use it.
	TopicNameStrategy = "TopicNameStrategy"
	// RecordNameStrategy: <record name>, whatever the topic.
	RecordNameStrategy = "RecordNameStrategy"
	// TopicRecordNameStrategy: <topic>-<record name>.
	TopicRecordNameStrategy = "TopicRecordNameStrategy"
)

// confluentPackage prefixes the strategies' Java class names, which a
// catalog entry may use as they appear in a serializer's configuration.
const confluentPackage = "io.confluent.kafka.serializers.subject."

// ErrNoRecordName is returned for a schema that names no record: a JSON
// Schema without a title, an Avro schema that is not a named type.
var ErrNoRecordName = errors.New("schema names no record")

// ParseSubjectStrategy reads a strategy name, short or with Confluent's
// package; "" is TopicNameStrategy, the serializers' default.
func ParseSubjectStrategy(s string) (string, error) {
	switch short := strings.TrimPrefix(s, confluentPackage); short {
	case "":
		return TopicNameStrategy, nil
	case TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy:
		return short, nil
	}
	return "", fmt.Errorf("unknown subject name strategy %q (want %s, %s or %s)", s, TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy)
}

// UsesRecordName reports whether the strategy takes the record name from
// the schema, so every version of a type must name the same record.
func UsesRecordName(strategy string) bool { return strategy != TopicNameStrategy }

// SubjectName is the subject of a value schema under a strategy, as
// Confluent's serializers compute it.
func SubjectName(strategy, topic, record string) string {
	switch strategy {
	case RecordNameStrategy:
		return record
	case TopicRecordNameStrategy:
		return topic + "-" + record
	}
	return topic + "-value"
}

// RecordName is the record name Confluent's serializers read from a
// schema: a JSON Schema's title, an Avro named type's full name
// (namespace.name).
func RecordName(encoding string, schema []byte) (string, error) {
	if encoding == EncodingAvro {
		var s struct {
			Type      any    `json:"type"`
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		}
		if err := json.Unmarshal(schema, &s); err != nil {
			return "", fmt.Errorf("parse Avro schema: %w", err)
		}
		switch {
		case s.Name == "":
			return "", fmt.Errorf("%w: an Avro record, enum or fixed has a name", ErrNoRecordName)
		case strings.Contains(s.Name, ".") || s.Namespace == "":
			return s.Name, nil
		}
		return s.Namespace + "." + s.Name, nil
	}
	var s struct {
		Title *string `json:"title"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return "", fmt.Errorf("parse JSON Schema: %w", err)
	}
	if s.Title == nil || *s.Title == "" {
		return "", fmt.Errorf("%w: a JSON Schema's record name is its \"title\"", ErrNoRecordName)
	}
	return *s.Title, nil
}

// SchemaFile is the file a version of a type is registered from: the
// .avsc twin for Avro-encoded types, the JSON Schema otherwise.
func (e Entry) SchemaFile(version int) string {
	if e.Encoding == EncodingAvro {
		return path.Join("events", e.Type, fmt.Sprintf("v%d.avsc", version))
	}
	return path.Join("events", e.Type, fmt.Sprintf("v%d.schema.json", version))
}

// Subject is the registry subject of one version of a type, under the
// entry's subject name strategy.
func (c *Catalog) Subject(typ string, version int) (string, error) {
	e, err := c.Lookup(typ)
	if err != nil {
		return "", err
	}
	if !UsesRecordName(e.SubjectStrategy) {
		return SubjectName(e.SubjectStrategy, e.Topic, ""), nil
	}
	file := e.SchemaFile(version)
	b, err := fs.ReadFile(c.files, file)
	if err != nil {
		return "", fmt.Errorf("%s v%d: %w", typ, version, err)
	}
	record, err := RecordName(e.Encoding, b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return SubjectName(e.SubjectStrategy, e.Topic, record), nil
}
