-- The transactional outbox. Services insert rows with outbox.Append in the
-- same transaction as their business change; the relay publishes them.
--
-- Order is id order (an identity, assigned at insert), never created_at: two
-- rows of one aggregate are appended by transactions that serialise on the
-- aggregate's own row, so their ids follow their commit order.
create table outbox (
    id              bigint generated always as identity primary key,
    event_id        uuid        not null unique,
    aggregate_type  text        not null,
    aggregate_id    text        not null,
    partition_key   text        not null,
    -- FNV-1a of partition_key (31 bits), computed by Append: the relay's
    -- shard of a row is key_hash % shard_count, so every row of one key lands
    -- in the same shard whatever the shard count is.
    key_hash        integer     not null check (key_hash >= 0),
    topic           text        not null,
    event_type      text        not null,
    event_version   integer     not null,
    -- The whole envelope exactly as validated (json keeps the bytes as they
    -- were written; jsonb would re-encode them).
    payload         json        not null,
    headers         jsonb       not null default '{}',
    created_at      timestamptz not null default clock_timestamp(),
    published_at    timestamptz,
    attempts        integer     not null default 0,
    last_error      text,
    next_attempt_at timestamptz,
    -- A row that failed too often is parked: the relay leaves it, and every
    -- later row of its key, alone until an operator retries or skips it.
    parked_at       timestamptz,
    -- A skipped row is never published; skip_reason says who decided and why.
    skipped_at      timestamptz,
    skip_reason     text
);

-- The relay's scan: pending rows in id order.
create index outbox_pending on outbox (id)
    where published_at is null and skipped_at is null;

-- The per-key order guard: pending rows of one key in id order.
create index outbox_pending_key on outbox (partition_key, id)
    where published_at is null and skipped_at is null;

-- Rows that failed at least once and are still pending: tiny, and what the
-- relay consults to hold back the later rows of a blocked key.
create index outbox_failing_key on outbox (partition_key, id)
    where published_at is null and skipped_at is null and attempts > 0;

-- Cleanup of published rows by age.
create index outbox_published_at on outbox (published_at)
    where published_at is not null;
