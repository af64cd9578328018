create table orders (
    id               uuid primary key,
    customer_id      text not null,
    currency         text not null,
    total_amount     bigint not null check (total_amount >= 0),
    items            jsonb not null,
    shipping_address jsonb,
    payment_method   text not null,
    status           text not null check (status in ('PENDING', 'RESERVED', 'CONFIRMED', 'CANCELLED')),
    reason           text,
    -- The client's Idempotency-Key and a hash of the request it came with:
    -- a retry with the same key and body returns this order, another body
    -- is refused.
    idempotency_key  text unique,
    request_hash     text not null,
    created_at       timestamptz not null default now(),
    updated_at       timestamptz not null default now(),
    terminal_at      timestamptz
);
create index orders_status on orders (status, created_at);
-- The sweeper's scan: orders still in flight, oldest first.
create index orders_in_flight on orders (created_at) where status in ('PENDING', 'RESERVED');

-- Every status an order went through and the event that moved it there.
-- event_id is unique: an event moves an order at most once.
create table order_history (
    id         bigint generated always as identity primary key,
    order_id   uuid not null references orders (id),
    status     text not null,
    reason     text,
    event_id   text unique,
    event_type text not null,
    at         timestamptz not null default now()
);
create index order_history_order on order_history (order_id, id);
