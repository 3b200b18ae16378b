package store

import "github.com/taskd/taskd/tasks"

// BulkQuery exposes the bulk read builder for EXPLAIN tests; after adds a cursor.
func BulkQuery(status tasks.Status, p tasks.BulkParams, ids []int64, after bool, limit int) (string, []any, error) {
	var cursor *bulkRow
	if after {
		cursor = &bulkRow{ID: 1, Priority: 2}
	}
	return bulkQuery(status, p, ids, cursor, limit)
}

// ClaimSQL is the locking path's claim UPDATE, for EXPLAIN tests of its pause check.
const ClaimSQL = claimSQL
