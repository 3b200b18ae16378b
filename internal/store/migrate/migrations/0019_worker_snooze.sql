-- 0019: a worker's handler may snooze its task.
--
-- A handler that returns taskd.Snooze(d) ends its claim with the task back in the
-- pool, claimable after d, the claim's attempt not counted (attempts back by one):
-- a 'snoozed' event records it (detail: d). tasks.snoozes counts those claims, so
-- that a task cannot snooze forever: a snooze once the task has snoozed the worker's
-- limit (worker.max_snoozes, default 100) makes it dead instead, with last_error
-- "snoozed <n> times, the limit" and a 'dead' event. A requeue resets it with the
-- attempts.
--
-- The column is added last and the ENUM value appended: MariaDB and MySQL change
-- both in place, without copying tasks or task_events.
ALTER TABLE tasks
  ADD COLUMN snoozes INT NOT NULL DEFAULT 0;

ALTER TABLE task_events MODIFY COLUMN kind ENUM('claimed', 'heartbeat', 'submitted', 'released', 'skipped', 'expired', 'recycled', 'failed', 'dead', 'requeued', 'cancelled', 'snoozed') NOT NULL;
