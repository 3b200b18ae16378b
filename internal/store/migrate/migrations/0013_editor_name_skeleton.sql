-- 0013: editors.name_skeleton keeps editors' names from looking alike. It is the
-- SHA-256 of the name's confusable skeleton (Unicode TR39: "rеv" with a Cyrillic е has
-- the skeleton of "rev"), computed by taskd (internal/textrule) whenever a name is
-- written; its UNIQUE key refuses a second editor whose name looks like another's, even
-- when both are created at the same moment.
--
-- The column is NULL for the editors made before it: taskd fills it (`taskd migrate`,
-- and each engine's start, for every NULL row). Two existing editors whose names look
-- alike cannot both have it: the older keeps it, the newer stays NULL and a warning names
-- both ("editor names look alike"), until one is renamed. A UNIQUE key accepts any number
-- of NULLs, so this migration never fails on existing names.
ALTER TABLE editors
  ADD COLUMN name_skeleton BINARY(32) NULL AFTER name,
  ADD UNIQUE KEY editors_name_skeleton (name_skeleton);
