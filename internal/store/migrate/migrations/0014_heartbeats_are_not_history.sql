-- 0014: a heartbeat no longer writes a task_events row. It moves the claim's
-- lease_expires_at, as before, and the editor's last-seen time, kept here: one row per
-- editor, raised by each accepted heartbeat of one of its claims, in the heartbeat's own
-- statement batch. A table of its own, not a column of editors: a claim locks its
-- editor's row (the capacity check) and, on Galera, writes it; a heartbeat that wrote
-- that row too would wait for the claims of its editor, and deadlock with a submit of
-- the same task in another group (which locks the editor's row, then the task's, where
-- the heartbeat locks the task's, then the editor's). Nothing that claims locks a row
-- of editor_seen. For the same reason it has no foreign key to editors: the check of one
-- takes a shared lock on the editor's row, with the same deadlock (editors are never
-- deleted, so none is needed).
--
-- The backfill takes each editor's latest 'heartbeat' event: one dive into
-- task_events_editor per editor. The old 'heartbeat' rows are left where they are (a
-- DELETE of all of them in one statement would hold its locks and undo for as long as
-- the table is big, during the deploy); nothing reads them any more, and they go with
-- their task's other events (see docs/operations.md, upgrades). The 'heartbeat' value
-- of task_events.kind stays, for them.
CREATE TABLE IF NOT EXISTS editor_seen (
  editor_id    BIGINT UNSIGNED NOT NULL,
  last_seen_at DATETIME(3) NOT NULL,
  PRIMARY KEY (editor_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

INSERT INTO editor_seen (editor_id, last_seen_at)
SELECT id, last_beat FROM (
  SELECT e.id, (SELECT MAX(ev.`at`) FROM task_events ev FORCE INDEX (task_events_editor)
    WHERE ev.editor_id = e.id AND ev.kind = 'heartbeat') AS last_beat
  FROM editors e
) b
WHERE last_beat IS NOT NULL
ON DUPLICATE KEY UPDATE last_seen_at = GREATEST(editor_seen.last_seen_at, VALUES(last_seen_at));
