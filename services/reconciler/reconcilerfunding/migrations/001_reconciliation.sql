-- The reconciler's tables for the broker rail, beside the funding
-- movements they check (the funding migrations must have run first). The
-- same shape as the payments database's: a keyset cursor moved only by
-- compare-and-set, and findings recorded once while open.

create table reconciliation_cursor (
    job                     text        primary key,
    last_id                 bigint      not null default 0,
    cycle_started_at        timestamptz not null default now(),
    last_cycle_completed_at timestamptz,
    last_cycle_duration     interval,
    cycles_completed        bigint      not null default 0,
    updated_at              timestamptz not null default now()
);

-- A finding is about one broker record (domain, broker_id); movement_id is
-- null when the mirror has no row for it (missing_locally), and broker_id
-- is '' for an intent the broker never answered (missing_broker_reference).
create table reconciliation_findings (
    id               bigint generated always as identity primary key,
    domain           text        not null,
    broker_id        text        not null,
    account_id       text        not null,
    movement_id      bigint      references funding_movements (id),
    kind             text        not null,
    verdict          text        not null check (verdict in ('repairable', 'needs_review')),
    local_status     text        not null,
    external_status  text,
    repair_command   text,
    command_event_id uuid,
    source           text        not null default 'scan' check (source in ('scan', 'heal')),
    detected_at      timestamptz not null default now(),
    resolved_at      timestamptz,
    resolution       text check (resolution in ('repaired', 'already_applied', 'superseded', 'cleared', 'manual')),
    resolved_by      text,
    note             text,
    check ((resolved_at is null) = (resolution is null)),
    check ((repair_command is not null) = (verdict = 'repairable'))
);

create unique index reconciliation_findings_open
    on reconciliation_findings (domain, broker_id, (coalesce(movement_id, 0)), kind) where resolved_at is null;

create index reconciliation_findings_open_kind
    on reconciliation_findings (kind, detected_at) where resolved_at is null;
