package taskd_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/taskd/taskd"
)

// Mount the editor API in a server you already have, under a prefix of your
// choosing. Stop drains it there too: long polls are answered 204 at once
// and requests in flight may finish.
func ExampleEngine_HTTPHandler() {
	const adminToken = "example-admin-token-0123456789"
	cfg := taskd.Config{
		MySQL:      taskd.MySQLConfig{DSN: exampleDSN},
		Redis:      taskd.RedisConfig{Addrs: []string{exampleRedisAddr}, KeyPrefix: examplePrefix},
		AdminToken: adminToken, // turns the editor API on
	}
	e, err := taskd.New(cfg, taskd.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Stop(ctx)

	mux := http.NewServeMux() // the application's own routes...
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") })
	mux.Handle("/taskd/", http.StripPrefix("/taskd", e.HTTPHandler())) // ...and taskd's
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// An admin creates an editor and adds an article; the editor takes it.
	var editor struct{ Token string }
	post(srv.URL+"/taskd/v1/editors", adminToken, `{"name": "ada-`+rand.Text()[:6]+`", "categories": ["news"]}`, &editor)
	post(srv.URL+"/taskd/v1/tasks", adminToken, `[{"category": "news", "title": "Budget vote tonight"}]`, nil)
	var next struct {
		Task  struct{ Title string }
		Fence int64
	}
	status := post(srv.URL+"/taskd/v1/assignments/next", editor.Token, `{}`, &next)
	fmt.Println(status, next.Task.Title)
	// Output: 200 Budget vote tonight
}

// post sends body with a bearer token, decodes the answer into out (unless
// nil) and returns the status.
func post(url, token, body string, out any) int {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			log.Fatal(err)
		}
	}
	return res.StatusCode
}
