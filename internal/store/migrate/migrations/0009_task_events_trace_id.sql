-- 0009: each audit event keeps the trace id of the operation that wrote it.
--
-- trace_id is the 16-byte W3C trace id of the sampled span the event was written
-- under (a claim's, a submit's, a release's, a sweep's), NULL when that operation was
-- not traced or not sampled, and for every event written before this migration. The
-- console's task detail links each event to its trace through telemetry.trace_url.
-- Binary, not hex: 16 bytes for a traced event, none for an untraced one.
--
-- One statement, so it applies whole or not at all. (A re-run after it applied fails
-- on the existing column.)
ALTER TABLE task_events
  ADD COLUMN trace_id BINARY(16) NULL AFTER detail;
