-- 0002: tasks_editor becomes a plain key. One task per editor is now kept by the claim
-- transactions (a claim locks the editor's row and checks that no task names the
-- editor); the UNIQUE key's duplicate checks locked neighbouring editors' index entries
-- and made concurrent claims deadlock.
--
-- One statement, so it applies whole or not at all. It drops and re-adds the key, so a
-- re-run on a key that is already plain (say, the migration ran but was not recorded)
-- works too. MariaDB and MySQL build the key in place, with the table open for writes.
ALTER TABLE tasks DROP INDEX tasks_editor, ADD KEY tasks_editor (editor_id);
