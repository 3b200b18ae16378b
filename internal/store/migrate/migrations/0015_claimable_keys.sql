-- 0015: the age of the oldest claimable task and the count of overdue tasks are read
-- from an index, not from the pool.
--
-- tasks_claimable holds pending tasks by category in order of run_after, which every
-- write that makes a task pending sets to when it became claimable (the insert, a
-- release, recycle, requeue or send back, the end of a retry's backoff): the oldest
-- claimable task of each category is the first entry of its range, read for all
-- categories in one loose index scan (a few entries per category, whatever the pool).
-- tasks_overdue holds pending tasks by due_order: the tasks past their due_at are one
-- range at the start, read without touching the rest. Both begin with status, so a
-- claim moves an entry in each, as in tasks_candidate and tasks_expiry.
--
-- Tasks made pending before this migration keep the run_after they had: one released
-- or recycled earlier counts from its older run_after until it is claimed.
--
-- One statement, so it applies whole or not at all.
ALTER TABLE tasks
  ADD KEY tasks_claimable (status, category, run_after),
  ADD KEY tasks_overdue (status, due_order, category, run_after);
