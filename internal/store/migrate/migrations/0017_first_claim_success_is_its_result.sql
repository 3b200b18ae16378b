-- 0017: a worker job that succeeds on its first claim writes no task_events rows.
--
-- A worker's batch claim (ClaimBatch) writes no 'claimed' event: it sets
-- tasks.claim_unlogged to 1 instead, "this claim's 'claimed' event was not written".
-- The row is written by the claim anyway and the column is in no index, so the mark
-- costs nothing measurable. A successful submit of such a claim writes no 'submitted'
-- event either: its task_results row is the record of both, with the claim's time
-- (claimed_at, which is set on exactly these rows) and trace ids. Every other end
-- of a marked claim (failed, dead, expired, recycled, taken over, released, force
-- released) first writes the missing 'claimed' event (its time assigned_at, its
-- fence, holder and trace id) with its own event, and clears the mark. So every
-- fence a task had is accounted for by exactly one record: its 'claimed' event or
-- a result row with claimed_at. Readers of a task's history (GET /v1/tasks/{id})
-- show a result row with claimed_at as the 'claimed' and 'submitted' events it
-- stands for. Editors' claims keep their events and never set the mark.
--
-- Columns added last: MariaDB and MySQL add them in place, without copying tasks.
ALTER TABLE tasks
  ADD COLUMN claim_unlogged TINYINT NOT NULL DEFAULT 0;

ALTER TABLE task_results
  ADD COLUMN claimed_at DATETIME(3) NULL,
  ADD COLUMN claim_trace_id BINARY(16) NULL,
  ADD COLUMN trace_id BINARY(16) NULL;
