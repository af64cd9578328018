-- One row per create key (derived by the orchestrator from the saga and
-- the step), stored before the carrier is called. create_calls is raised
-- and committed before every create call, so a row with create_calls > 0
-- and no carrier id is looked up at the carrier by its key before any new
-- call: a lost answer or a crash between the call and the commit never
-- buys a second label.
create table shipments (
    id                  bigint generated always as identity primary key,
    idempotency_key     text not null unique,
    saga_id             text not null,
    order_id            text not null,
    -- what the create command asked for; null while only a cancellation
    -- that came first is known
    parcel              jsonb,
    status              text not null check (status in ('PENDING', 'CREATED', 'DECLINED', 'CANCELLED')),
    carrier_shipment_id text unique,
    tracking_number     text,
    create_calls        int not null default 0,

    create_command_id   text,
    create_step         text,
    create_deadline     timestamptz,
    create_outcome      text check (create_outcome in ('succeeded', 'failed')),
    create_reason       text,
    create_retryable    boolean not null default false,

    cancel_key          text unique,
    cancel_command_id   text,
    cancel_step         text,
    cancel_deadline     timestamptz,
    cancel_status       text check (cancel_status in ('PENDING', 'DONE', 'FAILED')),
    -- our own voiding after a create gave up: no command waits for it
    cancel_internal     boolean not null default false,
    cancel_outcome      text check (cancel_outcome in ('succeeded', 'failed')),
    cancel_reason       text,
    cancel_retryable    boolean not null default false,

    -- the worker's queue: due when next_attempt_at <= now(); null is idle.
    -- leased_until is the claim of the attempt in flight: a command that
    -- makes the row due again waits for it, so two attempts never overlap.
    attempts            int not null default 0,
    next_attempt_at     timestamptz,
    leased_until        timestamptz,
    last_error          text,
    created_at          timestamptz not null default now(),
    updated_at          timestamptz not null default now()
);
create index shipments_due on shipments (next_attempt_at) where next_attempt_at is not null;
create index shipments_saga on shipments (saga_id);
