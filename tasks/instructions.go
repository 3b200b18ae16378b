package tasks

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// MaxInstructionsBytes bounds a category's instructions (Markdown): 64 KiB.
const MaxInstructionsBytes = 64 << 10

// Where a version of instructions came from (Instructions.Source).
const (
	InstructionsFromConfig = "config"
	InstructionsFromAPI    = "api"
)

// Instructions are one version of a category's instructions: Markdown, shown
// to its editors beside each task. Versions are numbered from 1 per category;
// a change is a new version and old versions stay readable.
type Instructions struct {
	Category string `db:"category"`
	Version  int    `db:"version"`
	// Body is the Markdown text; empty in a list of versions.
	Body string `db:"body"`
	// Source is InstructionsFromConfig or InstructionsFromAPI.
	Source    string    `db:"source"`
	CreatedAt time.Time `db:"created_at"`
}

// EditorInstructions are the current instructions of one of an editor's
// categories and the latest version of them the editor confirmed (0: none).
// Until Confirmed reaches Version, the editor is not offered the category's
// tasks.
type EditorInstructions struct {
	Instructions
	Confirmed int `db:"confirmed"`
}

// Pending says whether the editor has yet to confirm the current version; an
// empty version (instructions cleared) is never pending.
func (e EditorInstructions) Pending() bool { return e.Body != "" && e.Confirmed < e.Version }

// CheckInstructions checks a category's instructions: valid UTF-8, at most
// MaxInstructionsBytes; empty is allowed (instructions cleared, as a new
// version). It returns an error wrapping ErrInvalid.
func CheckInstructions(body string) error {
	if len(body) > MaxInstructionsBytes {
		return fmt.Errorf("%w: instructions must be at most %d bytes, not %d", ErrInvalid, MaxInstructionsBytes, len(body))
	}
	if !utf8.ValidString(body) {
		return fmt.Errorf("%w: instructions must be valid UTF-8", ErrInvalid)
	}
	return nil
}
