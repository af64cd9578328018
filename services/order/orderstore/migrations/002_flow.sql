-- How the order is checked out. Orchestrated orders wait for the
-- orchestrator's saga.finished; the stuck-order sweeper leaves them alone
-- (the orchestrator's timeouts end every saga).
alter table orders add column flow text not null default 'choreographed' check (flow in ('choreographed', 'orchestrated'));
