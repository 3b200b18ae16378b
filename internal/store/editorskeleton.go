package store

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/textrule"
)

const (
	// unskeletonedEditorsSQL reads the editors whose name has no skeleton yet:
	// those made before editors.name_skeleton, through its UNIQUE key (NULL
	// entries).
	unskeletonedEditorsSQL = `SELECT id, name FROM editors WHERE name_skeleton IS NULL ORDER BY id`
	// fillSkeletonSQL sets one editor's skeleton unless it was set meanwhile.
	fillSkeletonSQL = `UPDATE editors SET name_skeleton = ? WHERE id = ? AND name_skeleton IS NULL`
	// editorIDBySkeletonSQL finds the editor that has a skeleton.
	editorIDBySkeletonSQL = `SELECT id FROM editors WHERE name_skeleton = ?`
)

// FillNameSkeletons sets the name skeleton (editors.name_skeleton) of each
// editor of db that has none: the editors made before the column was. It
// returns how many it set. Editors are filled in id order, one UPDATE each,
// so that of two editors whose names look alike the older gets the
// skeleton; the newer keeps none, and log (nil: slog.Default()) warns of it
// ("editor names look alike", with both ids) until one is renamed. It is
// safe to run again and from several processes at once: a skeleton set
// meanwhile is kept. Errors are the database's, wrapped.
func FillNameSkeletons(ctx context.Context, db *sqlx.DB, log *slog.Logger) (int, error) {
	if log == nil {
		log = slog.Default()
	}
	var rows []struct {
		ID   int64  `db:"id"`
		Name string `db:"name"`
	}
	if err := db.SelectContext(ctx, &rows, unskeletonedEditorsSQL); err != nil {
		return 0, fmt.Errorf("fill name skeletons: %w", err)
	}
	filled := 0
	for _, r := range rows {
		skeleton := textrule.Skeleton(textrule.NFC(r.Name))
		res, err := db.ExecContext(ctx, fillSkeletonSQL, skeleton[:], r.ID)
		if mysqlErrorIs(err, erDupEntry) {
			var other int64
			_ = db.GetContext(ctx, &other, editorIDBySkeletonSQL, skeleton[:])
			log.WarnContext(ctx, "editor names look alike: rename one of them", "editor_id", r.ID, "like_editor_id", other)
			continue
		}
		if err != nil {
			return filled, fmt.Errorf("fill name skeleton of editor %d: %w", r.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			filled++
		}
	}
	return filled, nil
}
