package tasks

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
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
	// Capacity is how many claims the editor may hold at once,
	// 1..MaxCapacity; 0 means 1.
	Capacity int
	// Stages limits the editor to some stages of some of its categories (see
	// Editor.Stages): each key one of Categories, each value 1..MaxStages
	// stage names (CheckStage). Nil: every stage of every category.
	Stages map[string][]string
}

// CheckEditorWorkflow checks an editor's capacity (0 allowed: the default) and
// stage limits against its categories. Its errors wrap ErrInvalid and name the
// field.
func CheckEditorWorkflow(capacity int, categories []string, stages map[string][]string) error {
	if capacity < 0 || capacity > MaxCapacity {
		return fmt.Errorf("%w: capacity must be 1..%d, got %d", ErrInvalid, MaxCapacity, capacity)
	}
	for cat, list := range stages {
		if !slices.Contains(categories, cat) {
			return fmt.Errorf("%w: stages: %q is not one of the editor's categories", ErrInvalid, cat)
		}
		if len(list) == 0 {
			return fmt.Errorf("%w: stages: %q lists no stage (leave the category out for every stage)", ErrInvalid, cat)
		}
		if err := CheckStages(list); err != nil {
			return fmt.Errorf("%w (stages of %q)", err, cat)
		}
	}
	return nil
}
