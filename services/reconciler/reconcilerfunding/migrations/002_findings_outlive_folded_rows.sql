-- funding-svc folds a row its stream mirrored before the intent's answer
-- into the intent's row and deletes it (fundingstore.Store.Accepted). A
-- finding names its broker record by (domain, broker_id) and keeps it: it
-- lets go of the deleted row instead of blocking the fold, and the in-sync
-- clearing finds it by the broker record.
alter table reconciliation_findings
    drop constraint reconciliation_findings_movement_id_fkey,
    add constraint reconciliation_findings_movement_id_fkey
        foreign key (movement_id) references funding_movements (id) on delete set null;
