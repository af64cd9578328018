-- The payments record: one row per order's charge. The row (with its
-- idempotency key) is written before the provider is called, so
-- provider_payment_id stays NULL until the provider answers.
create table payments (
    id                       bigint generated always as identity primary key,
    order_id                 text not null unique,
    idempotency_key          text not null unique,
    provider_payment_id      text unique,
    amount                   bigint not null check (amount >= 0),
    currency                 text not null,
    status                   text not null default 'pending'
                             check (status in ('pending', 'paid', 'failed', 'refunded')),
    version                  bigint not null default 0,
    created_at               timestamptz not null default now(),
    updated_at               timestamptz not null default now(),
    observed_external_status text,
    last_reconciled_at       timestamptz,
    failure_reason           text,
    -- Service bookkeeping beyond the shared contract.
    customer_id              text not null default '',
    payment_method           text not null default '',
    attempts                 int not null default 0,
    next_attempt_at          timestamptz not null default now(),
    last_error               text,
    order_cancelled          boolean not null default false,
    refund_id                text,
    refund_attempts          int not null default 0,
    refund_next_attempt_at   timestamptz not null default now(),
    last_source              text
);

-- The charger's queue: pending payments due for a (re)try.
create index payments_pending_due on payments (next_attempt_at) where status = 'pending';
-- The refunder's queue: paid payments whose order was cancelled.
create index payments_refund_due on payments (refund_next_attempt_at) where status = 'paid' and order_cancelled;

-- Every transition the canonical writer applied, for audit and for the
-- demo's "no event applied twice" check.
create table payment_transitions (
    id          bigint generated always as identity primary key,
    payment_id  bigint not null references payments (id),
    from_status text not null,
    to_status   text not null,
    source      text not null,
    observed    text,
    event_id    uuid,
    at          timestamptz not null default now()
);
create index payment_transitions_payment on payment_transitions (payment_id);

-- Raw provider events, stored before they are applied and deduplicated on
-- the provider's event id; deliveries counts duplicates absorbed.
create table provider_events (
    id           text primary key,
    type         text not null,
    provider_payment_id text,
    payload      jsonb not null,
    received_at  timestamptz not null default now(),
    deliveries   int not null default 1,
    applied      text
);

-- Orders cancelled by the order service. A reservation that arrives after
-- its order was cancelled creates no charge.
create table cancelled_orders (
    order_id     text primary key,
    reason       text not null,
    cancelled_at timestamptz not null default now()
);
