-- The order in which a hold's commands were received, which is the order
-- the orchestrator sent them (one saga's commands share a partition). The
-- holder takes up only the oldest pending command of a hold, so a
-- compensation never runs beside, or ahead of, the capture sent before it.
-- Rows already stored are numbered in no particular order.
alter table hold_commands add column seq bigint generated always as identity;
create index hold_commands_pending_by_hold on hold_commands (hold_key, seq) where status = 'pending';
