package taskd_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"log/slog"

	_ "github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd"
)

// SendReceipt is the payload of a task of category "send-receipt".
type SendReceipt struct {
	Order int64 `json:"order"`
}

// Category names the category SendReceipt's tasks go to.
func (SendReceipt) Category() string { return "send-receipt" }

// An order and the task that mails its receipt commit together, in the
// application's own transaction, or not at all: the refused order leaves no
// task, and the worker hears of the placed one as soon as it commits.
func ExampleEngine_InsertTx() {
	receipts := make(chan SendReceipt, 2)
	send := func(ctx context.Context, job *taskd.Job[SendReceipt]) (any, error) {
		receipts <- job.Args
		return nil, nil
	}
	cfg := taskd.Config{
		MySQL: taskd.MySQLConfig{DSN: exampleDSN},
		Redis: taskd.RedisConfig{Addrs: []string{exampleRedisAddr}, KeyPrefix: examplePrefix + "inserttx:"},
	}
	e, err := taskd.New(cfg, taskd.WithJobHandler(send), taskd.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)

	// The application's own handle on the same database, and its table.
	db, err := sql.Open("mysql", exampleDSN)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS shop_orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, item VARCHAR(64) NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	placeOrder := func(item string, paid bool) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // nothing to do once committed
		res, err := tx.ExecContext(ctx, `INSERT INTO shop_orders (item) VALUES (?)`, item)
		if err != nil {
			return err
		}
		order, err := res.LastInsertId()
		if err != nil {
			return err
		}
		if _, err := e.InsertTx(ctx, tx, SendReceipt{Order: order}, nil); err != nil {
			return err
		}
		if !paid {
			return errors.New("payment refused")
		}
		return tx.Commit()
	}

	fmt.Println("book:", placeOrder("book", false))
	fmt.Println("lamp:", placeOrder("lamp", true))
	r := <-receipts
	var item string
	if err := db.QueryRowContext(ctx, `SELECT item FROM shop_orders WHERE id = ?`, r.Order).Scan(&item); err != nil {
		log.Fatal(err)
	}
	fmt.Println("receipt sent for the", item)
	// Output:
	// book: payment refused
	// lamp: <nil>
	// receipt sent for the lamp
}
