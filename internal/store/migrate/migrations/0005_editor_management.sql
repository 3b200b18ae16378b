-- 0005: editor management. editors.disabled_at marks a disabled editor (NULL: enabled):
-- its token is refused and a claim refuses it under the lock of its row (tasks/claim.go).
-- task_events_editor serves the per-editor counts of the audit trail: each count is
-- per kind, so a count reads exactly its rows as one index range (today's: from UTC
-- midnight on), never the whole trail and never the editor's heartbeats, the most
-- numerous kind; the last N submissions are a backward read of one range.
--
-- Two tables, so two statements, applied in order: adding the column to editors (a
-- small table) is instant, building the key reads task_events once, in place, with the
-- table open for writes. If the second one failed, a re-run stops at the first with
-- "Duplicate column name 'disabled_at'": drop that column (ALTER TABLE editors DROP
-- COLUMN disabled_at) and run `taskd migrate` again.
ALTER TABLE editors ADD COLUMN disabled_at DATETIME(3) NULL;
ALTER TABLE task_events ADD KEY task_events_editor (editor_id, kind, `at`);
