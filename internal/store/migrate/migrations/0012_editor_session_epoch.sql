-- 0012: an editor's page sessions end with its disable, for good.
--
-- A workspace session keeps the session_epoch its editor had when it signed in, and
-- every call made with it is refused once the editor's session_epoch has passed it.
-- Each disable raises session_epoch in the transaction that disables the editor, so
-- that a sign-in which read the editor just before the disable starts a session that
-- is dead from its first call, even once the editor is enabled again.
ALTER TABLE editors ADD COLUMN session_epoch BIGINT UNSIGNED NOT NULL DEFAULT 0;
