-- The broker's definite refusal (a 4xx other than 429) of an intent that
-- holds no broker id: the caller was told the request failed, so the
-- resume loop leaves it; only the same request submitted again retries.
alter table funding_movements add column refused text;
