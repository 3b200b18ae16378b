package web

import (
	"bytes"
	"net/http"
)

// recorder keeps the answer of a request the pages make to the API
// in-process: the sign-ins' checks of a token (GET /v1/me for an editor's,
// GET /v1/admin/categories/paused for the admin's).
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: make(http.Header)} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if r.body.Len()+len(b) > 1<<20 {
		return 0, http.ErrContentLength
	}
	return r.body.Write(b)
}
