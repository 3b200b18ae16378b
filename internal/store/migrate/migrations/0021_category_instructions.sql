-- 0021: instructions per category, versioned, and the editors' confirmations.
--
-- category_instructions keeps every version of a category's instructions
-- (Markdown): a change is a new row numbered one past the last, never an update,
-- so that old versions stay readable. editor_instruction_acks records each
-- version an editor confirmed; an editor whose categories have a current version
-- it has not confirmed is not offered tasks of them until it does (the API
-- filters the editor's categories before the claim). Both tables are new: nothing
-- is copied.
CREATE TABLE IF NOT EXISTS category_instructions (
  category   VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  version    INT UNSIGNED NOT NULL,
  body       MEDIUMTEXT NOT NULL,
  source     ENUM('config', 'api') NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (category, version)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS editor_instruction_acks (
  editor_id BIGINT UNSIGNED NOT NULL,
  category  VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  version   INT UNSIGNED NOT NULL,
  `at`      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (editor_id, category, version),
  CONSTRAINT editor_instruction_acks_editor FOREIGN KEY (editor_id) REFERENCES editors (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
