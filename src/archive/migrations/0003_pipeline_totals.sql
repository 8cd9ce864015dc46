-- hotrank archive, version 3: the pipeline's store totals (docs/design.md,
-- "Disaster recovery"). The archive writer stores the totals (`totals`,
-- `quarantine_hours`) read atomically with a pipeline position; this is
-- that position (JSON, per partition: the filter group's last delivered
-- raw entry and the entries in flight), so that a restore adds to them
-- exactly the journaled entries they do not include.
ALTER TABLE pipeline ADD COLUMN totals_position TEXT;
