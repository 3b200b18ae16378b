-- 0018: a worker's job moves fewer index entries.
--
-- pool_status is status while the task waits in a pool: 'pending' (the claims' pool)
-- or 'dead' (the requeues'), NULL while it is assigned and once it is done or
-- cancelled. tasks_candidate holds it instead of status: a claim moves the task's
-- entry out of the pending range, as before, and a completion (assigned -> done)
-- leaves it NULL and moves nothing, where it moved the entry from the assigned range
-- to the done range. Nothing reads the NULL range. The candidate reads of claims whose
-- lease has passed, which read the assigned range of tasks_candidate per category,
-- read tasks_expiry instead, which now holds the category: (status, category,
-- lease_expires_at), one range per category of the claims expired longest ago, as
-- short as the read's LIMIT. A claim and a completion move the task's entry in
-- tasks_expiry as before (its lease is set, then cleared).
--
-- tasks_claimable (0015), read for the pending tasks only, holds pool_status instead of
-- status too: a completion moves no entry in it either, and its read is the same range
-- as before. (Keyed on ended_status, a claim would move no entry in it and a completion
-- one, the same count, but its read would pass over the assigned tasks, and the oldest
-- claimable task per category could no longer be read from the index alone.)
-- tasks_overdue (0015) holds pending_due_at, the due_at of a pending task and NULL
-- otherwise, instead of (status, due_order): the overdue tasks are the same range
-- before now, and a task without a due_at (NULL whatever its status) never moves in it.
--
-- Per worker job without a due_at (a claim, then a completion that ends the task done)
-- this moves 8 secondary index entries instead of 12: the claim moves tasks_candidate,
-- tasks_claimable, tasks_expiry and tasks_holder_created; the completion tasks_expiry,
-- tasks_ended_created, tasks_category_created and tasks_done, which the lists of ended
-- tasks and the retention need keyed on the ended status. A claim of a task with a
-- due_at moves its tasks_overdue entry too.
--
-- Cost: adding a stored generated column copies tasks (it cannot be added in place:
-- MariaDB answers ALGORITHM=INPLACE with "not supported", and LOCK=NONE too): the
-- table can be read during the copy but not written, so claims, submits and inserts
-- wait for it. It takes as long as a copy of the table with its keys: 16 s for 500,000
-- tasks on a 2-core machine (docs/operations.md). On a large table, run it in a quiet
-- window.
--
-- One statement, so it applies whole or not at all.
ALTER TABLE tasks
  ADD COLUMN pool_status ENUM('pending', 'dead') AS (IF(status IN ('pending', 'dead'), status, NULL)) STORED AFTER ended_status,
  ADD COLUMN pending_due_at DATETIME(3) AS (IF(status = 'pending', due_at, NULL)) STORED AFTER pool_status,
  DROP KEY tasks_candidate,
  ADD KEY tasks_candidate (pool_status, category, priority DESC, due_order, id),
  DROP KEY tasks_expiry,
  ADD KEY tasks_expiry (status, category, lease_expires_at),
  DROP KEY tasks_claimable,
  ADD KEY tasks_claimable (pool_status, category, run_after),
  DROP KEY tasks_overdue,
  ADD KEY tasks_overdue (pending_due_at, category, run_after),
  ALGORITHM = COPY, LOCK = SHARED;
