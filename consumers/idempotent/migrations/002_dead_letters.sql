-- dead_letters records every record a group sent to its dead-letter topic,
-- with the original bytes, so that `replay dlq` can re-publish it after a fix.
-- One row per source position: a redelivery of the same poison record (a
-- crash before the offset commit, an offset replay) does not add a second row
-- nor a second DLQ record.
CREATE TABLE dead_letters (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer_group text        NOT NULL,
    topic          text        NOT NULL,
    partition      integer     NOT NULL,
    "offset"       bigint      NOT NULL,
    event_id       text,
    event_type     text,
    record_key     bytea,
    record_value   bytea,
    record_headers jsonb       NOT NULL DEFAULT '[]',
    reason         text        NOT NULL,
    error          text        NOT NULL,
    dlq_topic      text        NOT NULL,
    failed_at      timestamptz NOT NULL DEFAULT now(),
    replayed_at    timestamptz,
    UNIQUE (consumer_group, topic, partition, "offset")
);

CREATE INDEX dead_letters_pending ON dead_letters (consumer_group, id) WHERE replayed_at IS NULL;

---- create above / drop below ----

DROP TABLE dead_letters;
