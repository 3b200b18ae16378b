package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

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

// limitsSetSQL sets @taskd_limits, the store's limited categories, and
// empties @taskd_room, which limitsRoomSQL fills when the batch names a
// member of a limited category: the end of the SET that opens a claim batch
// (membersSetSQL's, whose ";\n" it replaces).
const limitsSetSQL = ", @taskd_limits = ?, @taskd_room = NULL;\n"

// limitsLockSQL writes the row of each limited category the batch's members
// name (its argument, a JSON array of them), in the order of categories (the
// lock order of every claim), before anything counts: see the comment at the
// top of this file.
const limitsLockSQL = "INSERT INTO category_limits (category, claims)\n\tSELECT c.c_cat, 1 FROM JSON_TABLE(?, '$[*]' COLUMNS (" +
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

// limitsRoomSQL sets @taskd_room (a read without locks: a locking read
// there would hold rows a concurrent claim holding a category's row waits
// for; SELECT ... INTO, not SET @v = (SELECT ...), which MariaDB reads with
// shared locks even at READ COMMITTED) to the ids of the members of limited
// categories that fit in their room. Its argument is limitMembers' table: a
// member's category and key as its claim names them, which its row must
// have, and its rank among the batch's members of its category and of its
// key, in id order, against the room the counts leave.
var limitsRoomSQL = "SELECT JSON_ARRAYAGG(f.f_id) INTO @taskd_room FROM JSON_TABLE(?, '$[*]' COLUMNS (f_id BIGINT PATH '$[0]',\n\t" +
	"f_cat VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[1]', f_key VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[2]',\n\t" +
	"f_rank INT PATH '$[3]', f_max INT PATH '$[4]', f_key_rank INT PATH '$[5]', f_key_max INT PATH '$[6]')) f\n\t" +
	"STRAIGHT_JOIN " + tasksByKeySQL + " ON tasks.id = f.f_id\n" +
	"WHERE tasks.category = f.f_cat AND COALESCE(tasks.limit_key, '') = f.f_key\n\t" +
	"AND (f.f_max = 0 OR f.f_rank <= f.f_max - " + fmt.Sprintf(assignedInCategorySQL, "f.f_cat") + ")\n\t" +
	"AND (f.f_key_max = 0 OR f.f_key = '' OR f.f_key_rank <= f.f_key_max - " + fmt.Sprintf(assignedOfKeySQL, "f.f_cat", "f.f_key") + ");\n"

// limitsFitSQL is the condition of a claim's UPDATE (and of its report) that
// its row fits in a limit: its category is not limited, or it is one of
// @taskd_room.
const limitsFitSQL = "(NOT EXISTS (SELECT 1 FROM " + limitsTableSQL + " WHERE l.l_cat = tasks.category)\n\t" +
	"OR tasks.id IN (SELECT r.r_id FROM JSON_TABLE(COALESCE(@taskd_room, '[]'), '$[*]' COLUMNS (r_id BIGINT PATH '$')) r))"

// limits are the store's limited categories: their JSON for @taskd_limits,
// and each's Workflow.
type limits struct {
	json  string
	of    map[string]tasks.Workflow
	names []string // the limited categories, in order
	keys  keyCache
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
	return &limits{json: string(b), of: of, names: cats, keys: keyCache{of: map[string]*categoryKeys{}}}, nil
}

// limitsSQL writes the end of the SET of the members of a claim batch of ps
// (membersSetSQL, without its ";\n") and the statements that keep the limits
// to q, before the claims' UPDATE, and returns their arguments: nothing but
// the SET's end without a limited category, and only limitsSetSQL when no
// member names one (the UPDATE's limitsFitSQL then refuses a member whose
// row is of a limited category all the same).
func (s *Store) limitsSQL(q *strings.Builder, ps []tasks.ClaimParams) ([]any, error) {
	if s.limits == nil {
		q.WriteString(";\n")
		return nil, nil
	}
	q.WriteString(limitsSetSQL)
	args := []any{s.limits.json}
	cats, members, err := s.limits.members(ps)
	if err != nil || members == "" {
		return args, err
	}
	q.WriteString(limitsLockSQL)
	s.guardWrite(q)
	q.WriteString(limitsLockOrderSQL + limitsRoomSQL + limitsNowSQL)
	return append(args, cats, members), nil
}

// members returns the limited categories the claims ps name, as the JSON
// array limitsLockSQL reads, and the table of their members limitsRoomSQL
// reads: both "" when ps name none. Every claim must name its category.
func (l *limits) members(ps []tasks.ClaimParams) (cats, members string, err error) {
	var in []tasks.ClaimParams
	for _, p := range ps {
		if p.Category == "" {
			return "", "", fmt.Errorf("%w: task %d: with limits in flight, a claim in a batch names its category", tasks.ErrInvalid, p.TaskID)
		}
		if _, ok := l.of[p.Category]; ok {
			in = append(in, p)
		}
	}
	if len(in) == 0 {
		return "", "", nil
	}
	slices.SortFunc(in, func(a, b tasks.ClaimParams) int { return cmp.Compare(a.TaskID, b.TaskID) })
	type key struct{ cat, key string }
	ranks := make(map[key]int)
	var names []string
	rows := make([][7]any, len(in))
	for i, p := range in {
		w := l.of[p.Category]
		ranks[key{p.Category, ""}]++
		if ranks[key{p.Category, ""}] == 1 {
			names = append(names, p.Category)
		}
		keyRank := 0
		if p.LimitKey != "" {
			ranks[key{p.Category, p.LimitKey}]++
			keyRank = ranks[key{p.Category, p.LimitKey}]
		}
		rows[i] = [7]any{p.TaskID, p.Category, p.LimitKey, ranks[key{p.Category, ""}], w.MaxInFlight, keyRank, w.KeyLimit}
	}
	slices.Sort(names)
	c, err := json.Marshal(names)
	if err != nil {
		return "", "", fmt.Errorf("encode the limited categories: %w", err)
	}
	m, err := json.Marshal(rows)
	if err != nil {
		return "", "", fmt.Errorf("encode the limited members: %w", err)
	}
	return string(c), string(m), nil
}

// notLimitedSQL writes the condition of a cycle's claims that their tasks
// are of no limited category to q, and returns its arguments: nothing
// without a limited category. Claims in limited categories take the locking
// path (see Claim); this refuses one that named its category wrong.
func (s *Store) notLimitedSQL(q *strings.Builder) []any {
	if s.limits == nil {
		return nil
	}
	q.WriteString(" AND category NOT IN (")
	args := listSQL(q, "?", s.limits.names, func(i int) []any { return []any{s.limits.names[i]} })
	q.WriteString(")")
	return args
}

// limited says whether a claim of p may be of a limited category: it names
// one, or none in a store with limits.
func (s *Store) limited(p tasks.ClaimParams) bool {
	if s.limits == nil {
		return false
	}
	_, ok := s.limits.of[p.Category]
	return ok || p.Category == ""
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
// writes (and so locks) the row of the category of the task p claims when
// that category is limited, before the task's row is locked (the lock order
// of every claim), and returns the category's limits, ok false when none.
// The category is p's, or, when p names none, read (one more statement).
// checkLimit then holds p to it under the task's lock.
func (s *Store) lockLimit(ctx context.Context, tx *sqlx.Tx, p tasks.ClaimParams) (w tasks.Workflow, ok bool, err error) {
	if s.limits == nil {
		return w, false, nil
	}
	cat := p.Category
	if cat == "" {
		if err := tx.GetContext(ctx, &cat, categoryOfSQL, p.TaskID); err != nil {
			return w, false, err // sql.ErrNoRows: no such task
		}
	}
	if w, ok = s.limits.of[cat]; !ok {
		return w, false, nil
	}
	_, err = tx.ExecContext(ctx, lockCategorySQL, cat)
	return w, err == nil, err
}

// checkLimit returns ErrStale when t, the task p claims read under its lock,
// is not of the category lockLimit locked (found) for p: p named it wrong.
func (s *Store) checkLimit(p tasks.ClaimParams, found bool, t tasks.Task) error {
	if s.limits == nil {
		return nil
	}
	if _, limited := s.limits.of[t.Category]; limited != found || p.Category != "" && p.Category != t.Category {
		return tasks.ErrStale
	}
	return nil
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

// Limit keys of the candidate reads. A category with a KeyLimit reads the
// first tasks of each of its keys (candidateKeyBranchSQL): the keys its
// pending tasks have are read apart (keysSQL, which reads the index entries
// of the category's pending tasks with a key), at most once per keysFresh
// in a process, or once per keysRetry while none was found or for keysFresh
// after the process inserted a task with a key (whose transaction commits
// after the insert returns, maybe after a read).
// A key first used by another process is read within keysFresh. A read
// takes at most keysPerRead keys, in turn, so that each key gets its reads
// whatever their number.
const (
	keysFresh   = time.Second
	keysRetry   = 100 * time.Millisecond
	keysPerRead = 128
	keysSQL     = "SELECT DISTINCT limit_key FROM tasks FORCE INDEX (tasks_limit) WHERE limit_status = 'pending' AND category = ?"
)

// keyCache keeps the limit keys of the keyed categories' pending tasks.
type keyCache struct {
	mu sync.Mutex
	of map[string]*categoryKeys
}

// categoryKeys are a category's keys as read at read, when the process last
// inserted a task with a key, and where its next candidate read starts.
type categoryKeys struct {
	keys     []string
	read     time.Time
	inserted time.Time
	next     int
}

// keysOf returns, of cats, each keyed category's keys to read now: up to
// keysPerRead of its pending tasks' keys, those after the last read's first.
func (s *Store) keysOf(ctx context.Context, cats []string) (map[string][]string, error) {
	if s.limits == nil {
		return nil, nil
	}
	var out map[string][]string
	for _, c := range cats {
		if s.limits.of[c].KeyLimit == 0 {
			continue
		}
		ks, err := s.limits.keys.take(ctx, c, func(ctx context.Context) ([]string, error) {
			var ks []string
			err := s.db.SelectContext(ctx, &ks, keysSQL, c)
			return ks, err
		})
		if err != nil {
			return nil, fmt.Errorf("limit keys of %q: %w", c, err)
		}
		if out == nil {
			out = make(map[string][]string)
		}
		out[c] = ks
	}
	return out, nil
}

// take returns the keys of category c a read takes now, read with read
// when those kept are too old.
func (k *keyCache) take(ctx context.Context, c string, read func(context.Context) ([]string, error)) ([]string, error) {
	k.mu.Lock()
	ck := k.of[c]
	if ck == nil {
		ck = &categoryKeys{}
		k.of[c] = ck
	}
	age := time.Since(ck.read)
	fresh := age < keysRetry || age < keysFresh && len(ck.keys) > 0 && time.Since(ck.inserted) >= keysFresh
	k.mu.Unlock()
	if !fresh {
		ks, err := read(ctx)
		if err != nil {
			return nil, err
		}
		k.mu.Lock()
		ck.keys, ck.read = ks, time.Now()
		k.mu.Unlock()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	n := len(ck.keys)
	if n <= keysPerRead {
		return ck.keys, nil
	}
	from := ck.next % n
	ck.next = from + keysPerRead
	out := make([]string, 0, keysPerRead)
	for i := range keysPerRead {
		out = append(out, ck.keys[(from+i)%n])
	}
	return out, nil
}

// insertedKeys notes the insert of ts: the keys of their keyed categories
// are read more often for a while (see keysFresh).
func (s *Store) insertedKeys(ts []tasks.NewTask) {
	if s.limits == nil {
		return
	}
	k := &s.limits.keys
	for _, t := range ts {
		if t.LimitKey == "" || s.limits.of[t.Category].KeyLimit == 0 {
			continue
		}
		k.mu.Lock()
		if ck := k.of[t.Category]; ck != nil {
			ck.inserted = time.Now()
		}
		k.mu.Unlock()
	}
}
