-- Each account's balance as a consumer of account-events builds it: the sum
-- of the account.* events applied, how many there were, and the last one.
create table account_balance_projection (
    account_id     text not null,
    currency       text not null,
    balance        bigint not null,
    events         bigint not null,
    last_event_id  text not null,
    last_partition integer not null,
    last_offset    bigint not null,
    updated_at     timestamptz not null default now(),
    primary key (account_id, currency)
);
