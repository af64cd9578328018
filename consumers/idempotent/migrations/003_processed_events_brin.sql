-- processed_events grows in processed_at order, so a BRIN index finds the
-- purge's old rows as well as a btree did, at a fraction of the write cost:
-- the btree on (consumer_group, processed_at) was a second index update on
-- every dedupe row, the hot path of every consumer.
DROP INDEX processed_events_retention;
CREATE INDEX processed_events_retention ON processed_events USING brin (processed_at);

---- create above / drop below ----

DROP INDEX processed_events_retention;
CREATE INDEX processed_events_retention ON processed_events (consumer_group, processed_at);
