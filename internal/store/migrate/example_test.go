package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/migrate"
)

// Up before starting a new version of an application that embeds taskd. (Not run by
// go test: it needs a server.)
func ExampleUp() {
	ctx := context.Background()
	db, err := store.Open(ctx, "taskd:secret@tcp(127.0.0.1:3306)/taskd")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	applied, err := migrate.Up(ctx, db)
	for _, m := range applied {
		fmt.Println("applied", m.ID(), m.Took)
	}
	var merr *migrate.Error
	switch {
	case errors.Is(err, migrate.ErrSchemaAhead):
		log.Fatal("a newer binary migrated this database: deploy it instead")
	case errors.As(err, &merr):
		log.Fatalf("migration %s stopped at statement %d: %v", merr.Migration.ID(), merr.Statement, err)
	case err != nil:
		log.Fatal(err)
	}
}

// ReadStatus changes nothing: a readiness check can refuse to start on a database
// that is not up to date.
func ExampleReadStatus() {
	ctx := context.Background()
	db, err := store.Open(ctx, "taskd:secret@tcp(127.0.0.1:3306)/taskd")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	st, err := migrate.ReadStatus(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	if err := st.Err(); err != nil {
		log.Fatal(err)
	}
	if pending := st.Pending(); len(pending) > 0 {
		log.Fatalf("%s is at version %04d, %d migrations pending: run taskd migrate", st.Database, st.Version(), len(pending))
	}
}
