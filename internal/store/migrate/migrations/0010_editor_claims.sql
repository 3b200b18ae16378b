-- 0010: a claim writes its editor's row.
--
-- A claim locks its editor's row, so that one editor's claims run one after the other
-- and the editor never holds two tasks. On a Galera cluster a row lock holds on its
-- own node only: two claims of one editor on two nodes would both find the editor
-- free. Only written rows are certified across nodes, so there a claim also raises
-- claims, the editor's claims so far: of two claims of one editor on two nodes at
-- once, one commits and the other is refused at certification (and retried, when it
-- finds the task the first one claimed).
ALTER TABLE editors ADD COLUMN claims BIGINT UNSIGNED NOT NULL DEFAULT 0;
