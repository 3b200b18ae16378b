-- 0008: the list keys leave the claim path.
--
-- tasks_status_created, tasks_category_created and tasks_done began with status, so
-- every claim (pending -> assigned), every recycle and release (assigned -> pending)
-- and every submit (assigned -> done) moved an entry in each of them, besides the keys
-- a claim needs (tasks_candidate, tasks_expiry, tasks_editor). Recycling 100,000
-- expired claims on a 2-core machine cost 24.6 InnoDB page writes and about 70 µs of
-- MariaDB CPU per claim with them, 15.9 and about 47 µs with the keys below.
--
-- ended_status is status once the task has ended (done, dead or cancelled), NULL while
-- it is pending or assigned. The three keys hold it instead of status: a claim, a
-- recycle and a release leave it NULL and so move no entry in them; a submit, a fail
-- to dead and a cancel move one each, as before. A list of ended tasks by status reads
-- one range, as before; a list of pending tasks reads the open range (ended_status IS
-- NULL) and passes over the assigned tasks in it, and a list of assigned tasks reads
-- tasks_expiry (tasks/EXPLAIN.md).
--
-- One statement, so it applies whole or not at all. (A re-run after it applied fails
-- on the existing column.)
ALTER TABLE tasks
  ADD COLUMN ended_status ENUM('done', 'dead', 'cancelled') AS (IF(status IN ('pending', 'assigned'), NULL, status)) STORED,
  DROP INDEX tasks_status_created,
  DROP INDEX tasks_category_created,
  DROP INDEX tasks_done,
  ADD KEY tasks_ended_created (ended_status, created_at, id),
  ADD KEY tasks_category_created (category, ended_status, created_at, id),
  ADD KEY tasks_done (ended_status, done_at, id);
