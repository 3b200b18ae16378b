package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// Limits in flight. A category with a MaxInFlight or a KeyLimit
// (tasks.Workflow) is limited: at most MaxInFlight of its tasks, and at most
// KeyLimit of one limit key of it, are assigned at once across every process.
// MySQL keeps the limit, as it keeps an editor's capacity: a claim of a task
// of a limited category first writes the category's row of category_limits
// (which locks it; on Galera, which row locks do not cross, two nodes'
// claims of the category then conflict at certification and one is retried),
// then counts, with a read that sees the latest commit (READ COMMITTED), the
// category's assigned tasks and each member's key's, and claims no more than
// the room left. Expired claims are counted until they are recycled or taken
// over (a takeover needs no room: the task stays assigned), so the count is
// never short. Nothing of this is in a store without a limited category: its
// statements are the same as before limits existed.

// limitsTableSQL is the table of the limited categories: @taskd_limits
// (limitsJSON's, set once per batch), each a row (l_cat, l_max, l_key).
const limitsTableSQL = "JSON_TABLE(@taskd_limits, '$[*]' COLUMNS (l_cat VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[0]',\n\t" +
	"l_max INT PATH '$[1]', l_key INT PATH '$[2]')) l"

// limitsSetSQL sets @taskd_limits, the batch's limited categories.
const limitsSetSQL = "SET @taskd_limits = ?;\n"

// limitsCategoriesSQL sets @taskd_limited to the limited categories of the
// batch's pending members, with a read that locks no row of tasks: a locking
// read there (an INSERT ... SELECT's) would hold rows a concurrent claim
// holding a category's row waits for. SELECT ... INTO, not SET @v = (SELECT
// ...): MariaDB reads a SET's subquery with shared locks, even at READ
// COMMITTED.
// (JSON_ARRAYAGG of a derived table of DISTINCT rows: MySQL has no
// JSON_ARRAYAGG(DISTINCT ...).)
const limitsCategoriesSQL = "SELECT JSON_ARRAYAGG(d.category) INTO @taskd_limited FROM (SELECT DISTINCT tasks.category FROM " + membersJoinSQL +
	"\n\tJOIN " + limitsTableSQL + " ON l.l_cat = tasks.category WHERE tasks.status = 'pending') d;\n"

// limitsLockSQL writes the row of each limited category of the batch's
// members (@taskd_limited), in the order of categories (the lock order of
// every claim), before anything counts: see the comment at the top of this
// file.
const limitsLockSQL = "INSERT INTO category_limits (category, claims)\n\tSELECT c.c_cat, 1 FROM JSON_TABLE(COALESCE(@taskd_limited, '[]'), '$[*]' COLUMNS (" +
	"c_cat VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) c WHERE 1"

// limitsLockOrderSQL ends limitsLockSQL, after its guard (guardWrite).
const limitsLockOrderSQL = " ORDER BY c.c_cat ON DUPLICATE KEY UPDATE claims = claims + 1;\n"

// limitsNowSQL moves the batch's instant to after the count of its room
// (limitsRoomSQL): the claims' assigned_at is then later than the end
// (submitted_at, a completion's instant, taken before it commits) of every
// claim the count left out, so that the rows show the limit kept as it was:
// an instant taken before the count would precede the end of a claim whose
// completion began after it and committed before the count.
const limitsNowSQL = "SET @taskd_now = NOW(3);\n"

// Counts of assigned tasks, under the lock of the category's row: of a
// category (tasks_expiry, a range of its claims), and of a limit key in it
// (tasks_limit, a range of the key's claims).
const (
	assignedInCategorySQL = "(SELECT COUNT(*) FROM tasks a FORCE INDEX (tasks_expiry) WHERE a.status = 'assigned' AND a.category = %s)"
	assignedOfKeySQL      = "(SELECT COUNT(*) FROM tasks a FORCE INDEX (tasks_limit) WHERE a.limit_status = 'assigned' AND a.category = %s AND a.limit_key = %s)"
)

// limitsRoomSQL sets @taskd_room (a read without locks, as
// limitsCategoriesSQL's) to the ids of the members of limited
// categories that fit in their room, members ranked by id: first each key's
// (no key, no limit per key), then, of those, each category's. The members
// are those the claim's UPDATE would take (the fence seen, pending, claimable
// now).
var limitsRoomSQL = "SELECT JSON_ARRAYAGG(c.id) INTO @taskd_room FROM (\n\t" +
	"SELECT k.id, k.category, k.l_max, ROW_NUMBER() OVER (PARTITION BY k.category ORDER BY k.id) AS c_rank FROM (\n\t\t" +
	"SELECT tasks.id, tasks.category, tasks.limit_key, l.l_max, l.l_key,\n\t\t\t" +
	"ROW_NUMBER() OVER (PARTITION BY tasks.category, tasks.limit_key ORDER BY tasks.id) AS k_rank\n\t\t" +
	"FROM " + membersJoinSQL + "\n\t\tJOIN " + limitsTableSQL + " ON l.l_cat = tasks.category\n\t\t" +
	"WHERE tasks.fence = m.m_fence AND tasks.status = 'pending' AND tasks.run_after <= @taskd_now) k\n\t" +
	"WHERE k.l_key = 0 OR k.limit_key IS NULL OR k.k_rank <= k.l_key - " + fmt.Sprintf(assignedOfKeySQL, "k.category", "k.limit_key") + ") c\n" +
	"WHERE c.l_max = 0 OR c.c_rank <= c.l_max - " + fmt.Sprintf(assignedInCategorySQL, "c.category") + ";\n"

// limitsFitSQL is the condition of a claim's UPDATE (and of its report) that
// its row fits in a limit: its category is not limited, or it is one of
// @taskd_room.
const limitsFitSQL = "(NOT EXISTS (SELECT 1 FROM " + limitsTableSQL + " WHERE l.l_cat = tasks.category)\n\t" +
	"OR tasks.id IN (SELECT r.r_id FROM JSON_TABLE(COALESCE(@taskd_room, '[]'), '$[*]' COLUMNS (r_id BIGINT PATH '$')) r))"

// limits are the store's limited categories: their JSON for @taskd_limits,
// and each's Workflow.
type limits struct {
	json string
	of   map[string]tasks.Workflow
}

// newLimits returns the limits of the limited categories of workflows, or
// nil when none is limited.
func newLimits(workflows map[string]tasks.Workflow) (*limits, error) {
	var cats []string
	for c, w := range workflows {
		if w.Limited() {
			cats = append(cats, c)
		}
	}
	if len(cats) == 0 {
		return nil, nil
	}
	slices.Sort(cats)
	rows := make([][3]any, len(cats))
	of := make(map[string]tasks.Workflow, len(cats))
	for i, c := range cats {
		w := workflows[c]
		rows[i] = [3]any{c, w.MaxInFlight, w.KeyLimit}
		of[c] = w
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("encode the limits: %w", err)
	}
	return &limits{json: string(b), of: of}, nil
}

// limitsSQL writes the statements of a claim batch that keep the limits to
// q, after the members are set and before the claims' UPDATE, and returns
// their arguments: nothing without a limited category.
func (s *Store) limitsSQL(q *strings.Builder) []any {
	if s.limits == nil {
		return nil
	}
	q.WriteString(limitsSetSQL + limitsCategoriesSQL + limitsLockSQL)
	s.guardWrite(q)
	q.WriteString(limitsLockOrderSQL + limitsRoomSQL + limitsNowSQL)
	return []any{s.limits.json}
}

// limitsWhereSQL writes the UPDATE's condition that each claim fits in its
// limits to q: nothing without a limited category.
func (s *Store) limitsWhereSQL(q *strings.Builder) {
	if s.limits != nil {
		q.WriteString(" AND " + limitsFitSQL)
	}
}

// limitsReportSQL is the column of a claim batch's report that says a
// member was left out by a limit: nothing without a limited category.
func (s *Store) limitsReportSQL() string {
	if s.limits == nil {
		return ""
	}
	return "NOT " + limitsFitSQL + " AS limited, "
}

// Statements of claimLocked's limit check.
const (
	categoryOfSQL   = `SELECT category FROM tasks WHERE id = ?`
	lockCategorySQL = `INSERT INTO category_limits (category, claims) VALUES (?, 1) ON DUPLICATE KEY UPDATE claims = claims + 1`
	roomSQL         = `SELECT ? - ` + "(SELECT COUNT(*) FROM tasks a FORCE INDEX (tasks_expiry) WHERE a.status = 'assigned' AND a.category = ?)" +
		`, ? - (SELECT COUNT(*) FROM tasks a FORCE INDEX (tasks_limit) WHERE a.limit_status = 'assigned' AND a.category = ? AND a.limit_key = ?)`
)

// lockLimit is the first step of claimLocked in a store with limits: it
// writes (and so locks) the row of the category of task id when that
// category is limited, before the task's row is locked (the lock order of
// every claim), and returns the category's limits, ok false when none.
func (s *Store) lockLimit(ctx context.Context, tx *sqlx.Tx, id int64) (w tasks.Workflow, ok bool, err error) {
	if s.limits == nil {
		return w, false, nil
	}
	var cat string
	if err := tx.GetContext(ctx, &cat, categoryOfSQL, id); err != nil {
		return w, false, err // sql.ErrNoRows: no such task
	}
	if w, ok = s.limits.of[cat]; !ok {
		return w, false, nil
	}
	_, err = tx.ExecContext(ctx, lockCategorySQL, cat)
	return w, err == nil, err
}

// limitRoom returns ErrLimited when t, a pending task of a category with
// limits w whose row lockLimit locked, has no room to be claimed.
func limitRoom(ctx context.Context, tx *sqlx.Tx, w tasks.Workflow, t tasks.Task) error {
	// NULL, which a Galera node answered once under the fault suite, is no
	// room: a limit is never passed on a count the server did not give.
	var cat, key sql.NullInt64
	if err := tx.QueryRowxContext(ctx, roomSQL, w.MaxInFlight, t.Category, w.KeyLimit, t.Category, t.LimitKey).Scan(&cat, &key); err != nil {
		return err
	}
	if w.MaxInFlight > 0 && (!cat.Valid || cat.Int64 < 1) || w.KeyLimit > 0 && t.LimitKey != "" && (!key.Valid || key.Int64 < 1) {
		return tasks.ErrLimited
	}
	return nil
}

// limitsOf returns the limits of the limited categories, nil when none is.
func (s *Store) limitsOf() map[string]tasks.Workflow {
	if s.limits == nil {
		return nil
	}
	return s.limits.of
}
