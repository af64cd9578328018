-- Money movements of the broker rail, one row per broker record: a cash
-- journal, an ACH or wire transfer, a funding-wallet transfer.
create table funding_movements (
    id            bigint generated always as identity primary key,
    domain        text not null check (domain in ('journal', 'transfer', 'wallet_transfer')),
    -- The key derived from the business request, written before the broker
    -- is called (Idempotency-Key of a journal, and its description so a
    -- lost answer can be found in a list). Null for a record first seen at
    -- the broker, such as a corrected journal's replacement.
    intent_key    text unique check (char_length(intent_key) between 1 and 128),
    request_hash  text,
    -- The broker's id, stored as soon as an answer or an event names it:
    -- the only key events and reconciliation correlate on.
    broker_id     text,
    account_id    text not null,
    direction     text not null check (direction in ('credit', 'debit')),
    amount        bigint not null check (amount > 0),
    currency      text not null,
    -- '' until the broker has accepted the record.
    status        text not null default '' check (status in ('', 'PENDING', 'COMPLETED', 'CANCELLED', 'REVERSED')),
    broker_status text not null default '',
    created_at    timestamptz not null default now(),
    updated_at    timestamptz not null default now(),
    unique (domain, broker_id)
);
-- The pollers' scan: records the broker is not done with.
create index funding_movements_open on funding_movements (domain, updated_at) where status not in ('CANCELLED', 'REVERSED');

-- The entries a movement made on its account: at most one apply and one
-- revert each, never edited.
create table funding_entries (
    movement_id bigint not null references funding_movements (id),
    kind        text not null check (kind in ('apply', 'revert')),
    account_id  text not null,
    amount      bigint not null, -- signed: what the entry did to the balance
    currency    text not null,
    at          timestamptz not null default now(),
    primary key (movement_id, kind)
);

-- Balances per account, the sum of the entries.
create table funding_balances (
    account_id text not null,
    currency   text not null,
    balance    bigint not null,
    primary key (account_id, currency)
);

-- Every stream message ever seen, keyed by the stream's documented dedupe
-- key (event_id for the status streams, ref_id for activities): the seen
-- set, whatever the message did (applied, no change, sent to review).
create table funding_stream_intake (
    stream      text not null,
    dedupe_key  text not null,
    event_id    text not null,
    payload     jsonb not null,
    received_at timestamptz not null default now(),
    primary key (stream, dedupe_key)
);

-- One cursor per stream, the greatest event id taken in, moved in the
-- transaction that takes the event in.
create table funding_stream_cursors (
    stream     text primary key,
    last_id    text not null,
    updated_at timestamptz not null default now()
);

-- News the service could not apply: a status no map knows, a record it
-- cannot place. Counted and kept for a person; nothing else changes.
create table funding_review (
    id            bigint generated always as identity primary key,
    domain        text not null,
    broker_id     text not null,
    intent_key    text not null,
    broker_status text not null,
    reason        text not null,
    source        text not null,
    at            timestamptz not null default now()
);
