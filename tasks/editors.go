package tasks

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// MaxEditorNameLen is the longest editor name, matching editors.name.
const MaxEditorNameLen = 128

// EditorHolder is the holder string of an editor's claims: "editor:<id>".
func EditorHolder(editorID int64) string {
	return "editor:" + strconv.FormatInt(editorID, 10)
}

// NewToken returns a new random API token (256 bits, base64url without padding) and
// its hash. Store only the hash; hand the token to its owner once.
func NewToken() (token string, hash [32]byte) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	token = base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token)
}

// HashToken returns the SHA-256 of a token. Tokens carry 256 random bits, so a plain
// fast hash is enough: there is nothing to brute-force that a slow hash would protect.
func HashToken(token string) [32]byte {
	return sha256.Sum256([]byte(token))
}

// CreateEditorParams are the arguments of CreateEditor.
type CreateEditorParams struct {
	// Name is 1..128 characters of valid UTF-8, unique as the database compares
	// names (utf8mb4_unicode_ci): case, accents and trailing spaces do not count.
	Name string
	// Categories are 1..MaxCategories categories of 1..64 characters; duplicates are
	// dropped.
	Categories []string
	// TokenHash is HashToken of the editor's token.
	TokenHash [32]byte
}

const (
	insertEditorSQL         = `INSERT INTO editors (name, token_hash) VALUES (?, ?)`
	insertEditorCategorySQL = `INSERT INTO editor_categories (editor_id, category) VALUES `
)

// CreateEditor creates an editor with its categories. It returns ErrInvalid for bad
// params (the message names the field) and ErrDuplicate if the name or token hash is
// taken.
func (s *Store) CreateEditor(ctx context.Context, p CreateEditorParams) (*Editor, error) {
	if err := checkText("name", p.Name, MaxEditorNameLen); err != nil {
		return nil, fmt.Errorf("create editor: %w", err)
	}
	if p.TokenHash == [32]byte{} {
		return nil, fmt.Errorf("create editor: %w: token hash must be set", ErrInvalid)
	}
	cats, err := editorCategories(p.Categories)
	if err != nil {
		return nil, fmt.Errorf("create editor: %w", err)
	}

	var id int64
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, insertEditorSQL, p.Name, p.TokenHash[:])
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		return insertEditorCategories(ctx, tx, id, cats)
	})
	if mysqlErrorIs(err, erDupEntry) {
		return nil, fmt.Errorf("create editor: %w: name or token is taken", ErrDuplicate)
	}
	if err != nil {
		return nil, fmt.Errorf("create editor: %w", refusedValue(err))
	}
	return s.GetEditor(ctx, id)
}

// editorCategories validates an editor's categories, 1..MaxCategories of them, drops
// duplicates and sorts them.
func editorCategories(cats []string) ([]string, error) {
	out, err := normalizeCategories(cats)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: categories are required (at least one)", ErrInvalid)
	}
	return out, nil
}

// insertEditorCategories gives editor id the categories cats in one INSERT.
func insertEditorCategories(ctx context.Context, tx *sqlx.Tx, id int64, cats []string) error {
	var q strings.Builder
	q.WriteString(insertEditorCategorySQL)
	args := make([]any, 0, 2*len(cats))
	for i, c := range cats {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?)")
		args = append(args, id, c)
	}
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}

// normalizeCategories validates categories, drops duplicates and sorts them.
func normalizeCategories(cats []string) ([]string, error) {
	out := make([]string, 0, len(cats))
	for _, c := range cats {
		if err := checkCategory(c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxCategories {
		return nil, fmt.Errorf("%w: at most %d categories", ErrInvalid, MaxCategories)
	}
	return out, nil
}

// editorRow is one row of an editor joined with one of its categories.
type editorRow struct {
	ID         int64      `db:"id"`
	Name       string     `db:"name"`
	CreatedAt  time.Time  `db:"created_at"`
	DisabledAt *time.Time `db:"disabled_at"`
	Category   *string    `db:"category"`
}

const editorSelectSQL = `SELECT e.id, e.name, e.created_at, e.disabled_at, c.category
FROM editors e LEFT JOIN editor_categories c ON c.editor_id = e.id `

// GetEditor returns the editor with its categories, enabled or not, or ErrNotFound.
func (s *Store) GetEditor(ctx context.Context, id int64) (*Editor, error) {
	e, err := s.editorWhere(ctx, `WHERE e.id = ? ORDER BY c.category`, id)
	if err != nil {
		return nil, fmt.Errorf("get editor %d: %w", id, err)
	}
	return e, nil
}

// EditorByTokenHash returns the editor whose token has the given hash, or ErrNotFound.
// A disabled editor is returned too: check Editor.Disabled.
func (s *Store) EditorByTokenHash(ctx context.Context, hash [32]byte) (*Editor, error) {
	e, err := s.editorWhere(ctx, `WHERE e.token_hash = ? ORDER BY c.category`, hash[:])
	if err != nil {
		return nil, fmt.Errorf("editor by token hash: %w", err)
	}
	return e, nil
}

// editorWhere reads one editor and its categories in one query.
func (s *Store) editorWhere(ctx context.Context, where string, arg any) (*Editor, error) {
	return editorWhere(ctx, s.db, where, arg)
}

// editorWhere reads one editor and its categories in one query on q, the store's
// handle or a transaction.
func editorWhere(ctx context.Context, q sqlx.QueryerContext, where string, arg any) (*Editor, error) {
	var rows []editorRow
	if err := sqlx.SelectContext(ctx, q, &rows, editorSelectSQL+where, arg); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, ErrNotFound
	}
	e := &Editor{ID: rows[0].ID, Name: rows[0].Name, CreatedAt: rows[0].CreatedAt, DisabledAt: rows[0].DisabledAt, Categories: []string{}}
	for _, r := range rows {
		if r.Category != nil {
			e.Categories = append(e.Categories, *r.Category)
		}
	}
	return e, nil
}
