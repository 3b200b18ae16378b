package tasks

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
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
	cats, err := normalizeCategories(p.Categories)
	if err != nil {
		return nil, fmt.Errorf("create editor: %w", err)
	}
	if len(cats) == 0 {
		return nil, fmt.Errorf("create editor: %w: categories must not be empty", ErrInvalid)
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
		q := insertEditorCategorySQL
		args := make([]any, 0, 2*len(cats))
		for i, c := range cats {
			if i > 0 {
				q += ", "
			}
			q += "(?, ?)"
			args = append(args, id, c)
		}
		_, err = tx.ExecContext(ctx, q, args...)
		return err
	})
	if mysqlErrorIs(err, erDupEntry) {
		return nil, fmt.Errorf("create editor: %w: name or token is taken", ErrDuplicate)
	}
	if err != nil {
		return nil, fmt.Errorf("create editor: %w", refusedValue(err))
	}
	return s.GetEditor(ctx, id)
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
	ID        int64     `db:"id"`
	Name      string    `db:"name"`
	CreatedAt time.Time `db:"created_at"`
	Category  *string   `db:"category"`
}

const editorSelectSQL = `SELECT e.id, e.name, e.created_at, c.category
FROM editors e LEFT JOIN editor_categories c ON c.editor_id = e.id `

// GetEditor returns the editor with its categories, or ErrNotFound.
func (s *Store) GetEditor(ctx context.Context, id int64) (*Editor, error) {
	e, err := s.editorWhere(ctx, `WHERE e.id = ? ORDER BY c.category`, id)
	if err != nil {
		return nil, fmt.Errorf("get editor %d: %w", id, err)
	}
	return e, nil
}

// EditorByTokenHash returns the editor whose token has the given hash, or ErrNotFound.
func (s *Store) EditorByTokenHash(ctx context.Context, hash [32]byte) (*Editor, error) {
	e, err := s.editorWhere(ctx, `WHERE e.token_hash = ? ORDER BY c.category`, hash[:])
	if err != nil {
		return nil, fmt.Errorf("editor by token hash: %w", err)
	}
	return e, nil
}

// editorWhere reads one editor and its categories in one query.
func (s *Store) editorWhere(ctx context.Context, where string, arg any) (*Editor, error) {
	var rows []editorRow
	if err := s.db.SelectContext(ctx, &rows, editorSelectSQL+where, arg); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, ErrNotFound
	}
	e := &Editor{ID: rows[0].ID, Name: rows[0].Name, CreatedAt: rows[0].CreatedAt, Categories: []string{}}
	for _, r := range rows {
		if r.Category != nil {
			e.Categories = append(e.Categories, *r.Category)
		}
	}
	return e, nil
}
