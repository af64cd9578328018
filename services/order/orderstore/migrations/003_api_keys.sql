-- Keys of the order API. A key is shown once, when it is created; only its
-- SHA-256 is kept (see services/order/apikey for why that hash), so this
-- table authenticates nobody who reads it.
create table api_keys (
    id          bigint generated always as identity primary key,
    name        text not null,
    key_hash    bytea not null unique check (length(key_hash) = 32),
    scopes      text[] not null check (cardinality(scopes) > 0),
    -- When set, the key creates and reads this customer's orders only.
    customer_id text,
    created_at  timestamptz not null default now(),
    revoked_at  timestamptz
);
-- Reads of one customer's orders (keys restricted to a customer).
create index orders_customer on orders (customer_id, created_at);
