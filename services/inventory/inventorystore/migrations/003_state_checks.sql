-- order.confirmed sets order_confirmed: a confirmed order's stock is never
-- released again (inventory.Check refuses the release).
alter table reservations add column order_confirmed boolean not null default false;

-- Events refused because they contradict what the service knows (see
-- services/internal/contradiction): no stock moved on them. An unresolved
-- row is a review entry.
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
