-- The W3C traceparent of the authorize command's consumer span, stored
-- with the hold it creates (NULL when tracing was off): a webhook about
-- the hold is applied in that trace, as one about a payment is in the
-- payment's. A hold's key is its authorize command's, so holds stored
-- before take their command's.
alter table payment_holds add column traceparent text;
update payment_holds h set traceparent = c.traceparent
  from hold_commands c where c.idempotency_key = h.hold_key and c.traceparent is not null;
