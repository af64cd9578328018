-- One row per saga. status is upper case and the columns are the ones seed
-- 001's dashboard queries read (status, started_at, completed_at, error), so
-- those queries run as written. deadline is when the sweeper must act on a
-- non-terminal saga: a reply timeout (awaiting_reply) or the end of a
-- retry's backoff.
create table saga_executions (
    saga_id        text primary key,
    saga_name      text not null,
    order_id       text not null,
    status         text not null check (status in ('PENDING', 'RUNNING', 'COMPENSATING', 'COMPLETED', 'COMPENSATED', 'FAILED')),
    input          jsonb not null,
    context        jsonb not null default '{}',
    error          text,
    failed_step    text,
    deadline       timestamptz,
    awaiting_reply boolean not null default false,
    command_id     text, -- event id of the latest command sent (see orchestrator.Saga.CommandID)
    started_at     timestamptz not null default now(),
    completed_at   timestamptz,
    updated_at     timestamptz not null default now(),
    check ((status in ('COMPLETED', 'COMPENSATED', 'FAILED')) = (completed_at is not null))
);
create index saga_executions_due on saga_executions (deadline) where status in ('RUNNING', 'COMPENSATING');
create index saga_executions_started on saga_executions (started_at);
create index saga_executions_open on saga_executions (updated_at) where status not in ('COMPLETED', 'COMPENSATED', 'FAILED');

-- One row per started step (a row exists once the step's command was
-- sent), with the columns the dashboard queries read (step_name,
-- step_status, step_error, step_order, created_at). step_status is lower
-- case: 'executed' is the success query 3 counts.
--
-- The saga's id is the column execution_id, and s.saga_id is the function
-- saga_id(saga_steps) below, called with attribute notation: query 2 joins
-- ON e.saga_id = s.saga_id yet selects an unqualified saga_id, which a
-- second column of that name would make ambiguous. Qualify it
-- (saga_steps.saga_id, s.saga_id) or use execution_id.
create table saga_steps (
    execution_id          text not null references saga_executions (saga_id),
    step_order            int not null,
    step_name             text not null,
    step_status           text not null check (step_status in ('running', 'executed', 'failed', 'compensating', 'compensated', 'compensation_failed')),
    step_error            text,
    idempotency_key       text not null,
    compensation_key      text not null,
    attempts              int not null default 0,
    compensation_attempts int not null default 0,
    uncertain             boolean not null default false,
    command_id            text, -- event id of the execute command's first send
    compensation_command_id text, -- and of the compensation's
    executed_at           timestamptz,
    compensated_at        timestamptz,
    created_at            timestamptz not null default now(),
    updated_at            timestamptz not null default now(),
    primary key (execution_id, step_order)
);
create index saga_steps_created on saga_steps (created_at);
create function saga_id(saga_steps) returns text language sql immutable as 'select $1.execution_id';

-- A FAILED saga needs a person: one review entry per saga, alerted once
-- (alerted_at) and closed by an operator (resolved_at, resolved_by,
-- resolution).
create table saga_reviews (
    id             bigint generated always as identity primary key,
    saga_id        text not null unique references saga_executions (saga_id),
    order_id       text not null,
    failed_steps   text[] not null,
    reason         text not null,
    created_at     timestamptz not null default now(),
    alerted_at     timestamptz,
    alert_attempts int not null default 0,
    next_alert_at  timestamptz not null default now(),
    resolved_at    timestamptz,
    resolved_by    text,
    resolution     text
);
create index saga_reviews_unalerted on saga_reviews (next_alert_at) where alerted_at is null;
create index saga_reviews_open on saga_reviews (created_at) where resolved_at is null;

-- Inputs the orchestrator refused (a reply for an unknown saga or step, or
-- for another command than the step's; a checkout request it cannot run),
-- recorded in the transaction that consumed them: nothing else happens, and
-- an operator can see what came and why it was refused.
create table saga_rejected_inputs (
    id              bigint generated always as identity primary key,
    event_id        text not null,
    event_type      text not null,
    saga_id         text,
    step            text,
    idempotency_key text,
    reason          text not null,
    error           text not null,
    received_at     timestamptz not null default now()
);
