-- What payment-svc learned of each choreographed order from order-svc's
-- own events: order.created gives the charge, order.confirmed sets
-- confirmed_at. A reservation is charged only for an order in this table
-- and only with its amount, currency, customer and payment method; a
-- cancellation of a confirmed order refunds nothing.
create table known_orders (
    order_id         text primary key,
    amount           bigint not null,
    currency         text not null,
    customer_id      text not null,
    payment_method   text not null default '',
    created_event_id uuid not null,
    learned_at       timestamptz not null default now(),
    confirmed_at     timestamptz
);

-- Reservations whose order.created has not been seen yet (it travels on
-- order-events, the reservation on inventory-events). Acknowledged and kept
-- here, they wait for their order without holding up other keys; the
-- order's arrival charges or refuses each, and the sweeper refuses those
-- still waiting after --unknown-order-wait.
create table waiting_reservations (
    event_id       uuid primary key,
    order_id       text not null,
    amount         bigint not null,
    currency       text not null,
    customer_id    text not null default '',
    payment_method text not null default '',
    data           jsonb not null,
    received_at    timestamptz not null default now()
);
create index waiting_reservations_order on waiting_reservations (order_id);
create index waiting_reservations_received on waiting_reservations (received_at);

-- Events refused because they contradict what the service knows (see
-- services/internal/contradiction): nothing was charged or refunded on
-- them. An unresolved row is a review entry.
create table refused_events (
    id          bigint generated always as identity primary key,
    event_id    uuid not null unique,
    event_type  text not null,
    order_id    text not null,
    reason      text not null,
    detail      text not null default '',
    data        jsonb not null,
    refused_at  timestamptz not null default now(),
    resolved_at timestamptz,
    resolved_by text,
    note        text
);
create index refused_events_open on refused_events (refused_at) where resolved_at is null;
create index refused_events_order on refused_events (order_id);
