-- Stock per SKU. received = available + reserved + committed always; the
-- checks make a negative bucket impossible whatever the code does.
create table stock (
    sku        text primary key,
    received   bigint not null default 0 check (received >= 0),
    available  bigint not null default 0 check (available >= 0),
    reserved   bigint not null default 0 check (reserved >= 0),
    committed  bigint not null default 0 check (committed >= 0),
    updated_at timestamptz not null default now(),
    check (received = available + reserved + committed)
);

-- One reservation per order; lines hold what was reserved, sorted by SKU.
create table reservations (
    id         uuid primary key,
    order_id   uuid not null unique,
    status     text not null check (status in ('HELD', 'COMMITTED', 'RELEASED', 'REJECTED')),
    lines      jsonb not null,
    reason     text,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);
create index reservations_status on reservations (status);
