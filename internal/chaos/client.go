package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"
)

// router spreads requests over the replicas in rotation, as a load balancer
// would; a fault takes a replica out of rotation before it pauses it.
type router struct {
	mu       sync.Mutex
	bases    []string
	out      map[string]bool
	inflight map[string]int
}

func (r *router) pick() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var in []string
	for _, b := range r.bases {
		if !r.out[b] {
			in = append(in, b)
		}
	}
	if len(in) == 0 {
		in = r.bases
	}
	b := in[rand.IntN(len(in))]
	if r.inflight == nil {
		r.inflight = make(map[string]int)
	}
	r.inflight[b]++
	return b
}

// done ends a request pick started.
func (r *router) done(base string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight[base]--
}

// busy returns the number of requests in flight to base.
func (r *router) busy(base string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inflight[base]
}

func (r *router) add(base string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bases {
		if b == base {
			return
		}
	}
	r.bases = append(r.bases, base)
}

func (r *router) setOut(base string, out bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out == nil {
		r.out = make(map[string]bool)
	}
	r.out[base] = out
}

// response is the outcome of one HTTP request.
type response struct {
	status     int // 0 when no answer came
	body       []byte
	retryAfter string
	err        error // transport error or timeout
	timedOut   bool  // the client's deadline passed without an answer
	started    time.Time
	answered   time.Time
}

func (r response) ok() bool { return r.status >= 200 && r.status < 300 }

func (r response) code() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

// newHTTPClient returns a client with its own connection pool.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}}
}

// call sends one request. body is sent as is when it is []byte, else encoded
// as JSON (nil sends no body). timeout bounds the whole exchange.
func call(ctx context.Context, c *http.Client, base, method, path, token string, body any, timeout time.Duration) response {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return response{err: err}
		}
		rd = bytes.NewReader(j)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp := response{started: time.Now()}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		resp.err = err
		return resp
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	hr, err := c.Do(req)
	if err == nil {
		resp.body, err = io.ReadAll(hr.Body)
		hr.Body.Close()
		if err == nil {
			resp.status = hr.StatusCode
			resp.retryAfter = hr.Header.Get("Retry-After")
		}
	}
	resp.answered = time.Now()
	if err != nil {
		resp.err = err
		resp.timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	return resp
}
