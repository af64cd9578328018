-- The W3C traceparent of the span that wrote the row (the consumer's span
-- of the event that asked for the charge or the hold command), NULL when
-- tracing was off: the charger's and the holder's attempts, the webhooks
-- applied to the payment and the reconciler's repairs continue that trace.
alter table payments add column traceparent text;
alter table hold_commands add column traceparent text;
