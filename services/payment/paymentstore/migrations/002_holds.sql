-- Authorization holds of the orchestrated checkout. A hold's row, keyed by
-- the authorize command's idempotency key (<saga_id>:<step>), is written
-- before the provider is called; provider_payment_id stays NULL until the
-- provider names the PaymentIntent.
create table payment_holds (
    hold_key                 text primary key,
    saga_id                  text not null,
    order_id                 text not null,
    customer_id              text not null default '',
    amount                   bigint not null check (amount >= 0),
    currency                 text not null,
    payment_method           text not null default '',
    provider_payment_id      text unique,
    status                   text not null default 'authorizing'
                             check (status in ('authorizing', 'authorized', 'declined', 'captured', 'released',
                                               'expired', 'refunded', 'void')),
    amount_captured          bigint,
    refund_id                text,
    failure_reason           text,
    observed_external_status text,
    created_at               timestamptz not null default now(),
    updated_at               timestamptz not null default now()
);

-- Every hold command received, one row per idempotency key: the first
-- command's id, what it asks, and once answered the reply it got, so a
-- repeated command is answered with the same reply and never applied
-- twice. Pending rows are the holder's queue.
create table hold_commands (
    idempotency_key     text primary key,
    command_type        text not null,
    command_id          uuid not null,
    correlation_id      text not null default '',
    saga_id             text not null,
    step                text not null,
    hold_key            text not null,
    amount              bigint not null,
    currency            text not null,
    status              text not null default 'pending' check (status in ('pending', 'replied')),
    outcome             text check (outcome in ('succeeded', 'failed')),
    reason              text,
    retryable           boolean,
    reply_amount        bigint,
    provider_payment_id text,
    attempts            int not null default 0,
    next_attempt_at     timestamptz not null default now(),
    last_error          text,
    created_at          timestamptz not null default now(),
    replied_at          timestamptz
);
create index hold_commands_due on hold_commands (next_attempt_at) where status = 'pending';
