-- Reservations made by the orchestrated saga's inventory.reserve_stock
-- carry the command's idempotency key and the id of the command that made
-- them: a repeated command is answered from the row, naming that first
-- command, as saga.step_replied's command_id says. A release that comes
-- before its reservation (the orchestrator gave the reserve up after its
-- timeouts) leaves a RELEASED row with no lines, so the late reserve finds
-- it and is refused instead of holding stock nobody will release.
alter table reservations add column saga_key text unique;
alter table reservations add column saga_command_id text;
