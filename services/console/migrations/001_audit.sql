-- Every operator action the console performed: who, what, on which row,
-- why, and when. Rows are only ever inserted; the console shows the newest.
create table console_audit (
    id       bigint generated always as identity primary key,
    at       timestamptz not null default now(),
    actor    text        not null,
    action   text        not null,
    service  text        not null,
    target   text        not null,
    reason   text        not null default '',
    outcome  text        not null
);

create index console_audit_at on console_audit (at desc);

---- create above / drop below ----

drop table console_audit;
