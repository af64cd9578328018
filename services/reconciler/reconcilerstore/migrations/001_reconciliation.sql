-- The reconciler's tables, beside the payments they check (the payment
-- migrations must have run first: findings reference payments).

-- One row per reconciliation job: where its keyset scan stands. last_id only
-- moves by compare-and-set (update ... where last_id = <what I read>), so two
-- reconcilers on one job never both record the same page.
create table reconciliation_cursor (
    job                     text        primary key,
    last_id                 bigint      not null default 0,
    cycle_started_at        timestamptz not null default now(),
    last_cycle_completed_at timestamptz,
    last_cycle_duration     interval,
    cycles_completed        bigint      not null default 0,
    updated_at              timestamptz not null default now()
);

-- Every drift the reconciler recorded. Rows are never deleted: a resolved
-- finding keeps how and by whom it was closed.
create table reconciliation_findings (
    id               bigint generated always as identity primary key,
    payment_id       bigint      not null references payments (id),
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

-- The same drift is recorded once while it is open, however often it is
-- scanned: inserts use on conflict ... do nothing against this index.
create unique index reconciliation_findings_open
    on reconciliation_findings (payment_id, kind) where resolved_at is null;

-- `reconciler findings list` and the open-findings gauge: open ones by kind.
create index reconciliation_findings_open_kind
    on reconciliation_findings (kind, detected_at) where resolved_at is null;
