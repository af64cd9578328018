-- processed_events is the dedupe ledger: one row per (consumer group, event)
-- whose effect is committed. It is written in the same transaction as the
-- effect, so "row exists" means "effect exists".
CREATE TABLE processed_events (
    consumer_group text        NOT NULL,
    event_id       uuid        NOT NULL,
    topic          text        NOT NULL,
    partition      integer     NOT NULL,
    "offset"       bigint      NOT NULL,
    processed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, event_id)
);

-- The retention purge deletes a group's oldest rows in batches.
CREATE INDEX processed_events_retention ON processed_events (consumer_group, processed_at);

---- create above / drop below ----

DROP TABLE processed_events;
