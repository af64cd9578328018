-- The WAL relay's slots. A slot streams only transactions that commit after
-- it was created; the rows committed before (up to drain_upto) are published
-- from the table once, and drained_at says that is done, so a relay that
-- dies during that first drain does it again on its next start.
create table outbox_wal_slot (
    slot       text primary key,
    drain_upto bigint not null,
    drained_at timestamptz
);
