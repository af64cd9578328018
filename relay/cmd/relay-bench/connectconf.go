package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/schemas"
)

// properties is a Java .properties file, one key per line, in key order.
type properties map[string]string

func (p properties) String() string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		// Values here hold no newline; a backslash is the one character
		// the format would otherwise read as an escape.
		fmt.Fprintf(&b, "%s=%s\n", k, strings.ReplaceAll(p[k], `\`, `\\`))
	}
	return b.String()
}

// kafkaClientProperties are the Java client settings of c: brokers, TLS
// with the stack's CA as a PEM trust store, and SASL with the mechanism's
// login module.
func kafkaClientProperties(c kit.KafkaConfig) (properties, error) {
	if len(c.Brokers) == 0 {
		return nil, fmt.Errorf("no Kafka brokers configured")
	}
	p := properties{"bootstrap.servers": strings.Join(c.Brokers, ",")}
	protocol := "PLAINTEXT"
	if c.TLS {
		protocol = "SSL"
		if c.TLSCAFile != "" {
			p["ssl.truststore.type"] = "PEM"
			p["ssl.truststore.location"] = c.TLSCAFile
		}
	}
	if c.SASLMechanism != "" {
		protocol = "SASL_" + map[bool]string{true: "SSL", false: "PLAINTEXT"}[c.TLS]
		var module string
		switch strings.ToUpper(c.SASLMechanism) {
		case "PLAIN":
			module = "org.apache.kafka.common.security.plain.PlainLoginModule"
		case "SCRAM-SHA-256", "SCRAM-SHA-512":
			module = "org.apache.kafka.common.security.scram.ScramLoginModule"
		default:
			return nil, fmt.Errorf("kafka-sasl-mechanism %q: Kafka Connect is set up here for PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 only", c.SASLMechanism)
		}
		p["sasl.mechanism"] = strings.ToUpper(c.SASLMechanism)
		p["sasl.jaas.config"] = fmt.Sprintf(`%s required username=%s password=%s;`, module, jaasQuote(c.SASLUser), jaasQuote(c.SASLPassword))
	}
	p["security.protocol"] = protocol
	return p, nil
}

// jaasQuote quotes a JAAS option value.
func jaasQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// connectWorker is the standalone worker's configuration: the Kafka
// connection for the worker itself, its producers and its admin client;
// string converters, so a record's key and value are the outbox row's
// partition key and payload bytes; offsets in a file.
func connectWorker(c kit.KafkaConfig, offsetsFile string, restPort int) (properties, error) {
	client, err := kafkaClientProperties(c)
	if err != nil {
		return nil, err
	}
	p := properties{
		"key.converter":                "org.apache.kafka.connect.storage.StringConverter",
		"value.converter":              "org.apache.kafka.connect.storage.StringConverter",
		"offset.storage.file.filename": offsetsFile,
		"listeners":                    fmt.Sprintf("http://127.0.0.1:%d", restPort),
		// Every plugin is on the class path; nothing to scan elsewhere.
		"plugin.discovery": "only_scan",
	}
	for k, v := range client {
		p[k] = v
		if k != "bootstrap.servers" {
			p["producer."+k] = v
			p["admin."+k] = v
		}
	}
	return p, nil
}

// debeziumConnector is the PostgreSQL connector on the outbox table with
// the outbox event router mapped onto Concord's columns: the record goes to
// the row's topic, keyed by partition_key, with the payload column's bytes
// as its value and event_id, event_type and event_version as headers of
// those names, as Concord's relay publishes them. Connect's InsertHeader
// adds content-type, and DropHeaders removes the router's own "id" header
// (the event id again, under another name).
func debeziumConnector(name string, db dbTarget, slot string) properties {
	return properties{
		"name":                        name,
		"connector.class":             "io.debezium.connector.postgresql.PostgresConnector",
		"tasks.max":                   "1",
		"plugin.name":                 "pgoutput",
		"database.hostname":           db.host,
		"database.port":               db.port,
		"database.user":               db.user,
		"database.password":           db.password,
		"database.dbname":             db.name,
		"topic.prefix":                slot,
		"slot.name":                   slot,
		"publication.name":            slot,
		"publication.autocreate.mode": "filtered",
		"table.include.list":          "public.outbox",
		// The table is empty when the connector first starts; rows come
		// from the stream only, as in relay --mode wal.
		"snapshot.mode": "no_data",
		// Debezium's default waits up to 500 ms for a batch to fill; the
		// latency run would measure that wait. 10 ms, as the Watermill
		// peer's poll interval.
		"poll.interval.ms": "10",
		// Debezium adds __debezium.context.* headers to every record by
		// default; Concord's records carry none of them.
		"extended.headers.enabled": "false",

		"transforms":                                  "outbox,contentType,dropId",
		"transforms.outbox.type":                      "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.table.field.event.id":      "event_id",
		"transforms.outbox.table.field.event.key":     "partition_key",
		"transforms.outbox.table.field.event.payload": "payload",
		"transforms.outbox.route.by.field":            "topic",
		"transforms.outbox.route.topic.replacement":   "${routedByValue}",
		"transforms.outbox.table.fields.additional.placement": fmt.Sprintf("event_id:header:%s,event_type:header:%s,event_version:header:%s",
			schemas.HeaderEventID, schemas.HeaderEventType, schemas.HeaderEventVersion),
		"transforms.contentType.type":          "org.apache.kafka.connect.transforms.InsertHeader",
		"transforms.contentType.header":        schemas.HeaderContentType,
		"transforms.contentType.value.literal": schemas.ContentTypeJSON,
		"transforms.dropId.type":               "org.apache.kafka.connect.transforms.DropHeaders",
		"transforms.dropId.headers":            "id",
	}
}

// dbTarget is where the connector connects.
type dbTarget struct {
	host, port, user, password, name string
}
