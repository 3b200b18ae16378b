package web_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// This file is a small WebDriver BiDi client (https://w3c.github.io/webdriver-bidi/)
// over a minimal RFC 6455 WebSocket client, enough for the Firefox tests:
// commands with their answers, and events. Firefox speaks BiDi itself when
// started with --remote-debugging-port, so no geckodriver sits in between.
// The module has no WebSocket library, and one would be a dependency for a
// test's sake: the client side of RFC 6455 is short.

// wsMaxMessage bounds one message from the browser (a full-page screenshot
// of a long page is a few megabytes of base64).
const wsMaxMessage = 64 << 20

// wsGUID is RFC 6455's fixed string for Sec-WebSocket-Accept.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// WebSocket opcodes (RFC 6455 section 5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// wsConn is the client end of a WebSocket connection. One goroutine reads;
// writes are serialized.
type wsConn struct {
	conn net.Conn
	br   *bufio.Reader
	wmu  sync.Mutex
}

// dialWS opens a WebSocket to a ws:// address; ctx bounds the handshake.
func dialWS(ctx context.Context, rawURL string) (*wsConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("websocket address %q: %w", rawURL, err)
	}
	if u.Scheme != "ws" {
		return nil, fmt.Errorf("websocket address %q: only ws:// is supported", rawURL)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("websocket dial %s: %w", u.Host, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	key := base64.StdEncoding.EncodeToString(nonce)
	req := &http.Request{
		Method: "GET",
		URL:    u,
		Host:   u.Host,
		Header: http.Header{
			"Upgrade":               {"websocket"},
			"Connection":            {"Upgrade"},
			"Sec-WebSocket-Key":     {key},
			"Sec-WebSocket-Version": {"13"},
		},
	}
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("websocket handshake with %s: %w", u.Host, err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("websocket handshake with %s: %w", u.Host, err)
	}
	res.Body.Close()
	sum := sha1.Sum([]byte(key + wsGUID))
	if res.StatusCode != http.StatusSwitchingProtocols {
		conn.Close()
		return nil, fmt.Errorf("websocket handshake with %s: status %s", u.Host, res.Status)
	}
	if got := res.Header.Get("Sec-WebSocket-Accept"); got != base64.StdEncoding.EncodeToString(sum[:]) {
		conn.Close()
		return nil, fmt.Errorf("websocket handshake with %s: wrong Sec-WebSocket-Accept %q", u.Host, got)
	}
	if ctx.Err() != nil {
		conn.Close()
		return nil, fmt.Errorf("websocket handshake with %s: %w", u.Host, ctx.Err())
	}
	_ = conn.SetDeadline(time.Time{})
	return &wsConn{conn: conn, br: br}, nil
}

// writeFrame sends one final frame; a client masks every frame it sends.
func (w *wsConn) writeFrame(op byte, payload []byte) error {
	hdr := make([]byte, 0, 14)
	hdr = append(hdr, 0x80|op)
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n <= 0xFFFF:
		hdr = append(hdr, 0x80|126)
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	hdr = append(hdr, mask[:]...)
	masked := make([]byte, len(payload))
	for i, b := range payload {
		masked[i] = b ^ mask[i%4]
	}
	w.wmu.Lock()
	defer w.wmu.Unlock()
	_, err := w.conn.Write(append(hdr, masked...))
	return err
}

// writeText sends a text message.
func (w *wsConn) writeText(p []byte) error { return w.writeFrame(opText, p) }

// readMessage returns the next text or binary message, joining fragments
// and answering pings on the way; io.EOF when the browser closed the
// connection.
func (w *wsConn) readMessage() ([]byte, error) {
	var msg []byte
	started := false
	for {
		var h [2]byte
		if _, err := io.ReadFull(w.br, h[:]); err != nil {
			return nil, err
		}
		fin, op := h[0]&0x80 != 0, h[0]&0x0F
		n := uint64(h[1] & 0x7F)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		var mask [4]byte
		masked := h[1]&0x80 != 0
		if masked {
			if _, err := io.ReadFull(w.br, mask[:]); err != nil {
				return nil, err
			}
		}
		if n > wsMaxMessage || uint64(len(msg))+n > wsMaxMessage {
			return nil, fmt.Errorf("websocket message over %d bytes", wsMaxMessage)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(w.br, payload); err != nil {
			return nil, err
		}
		if masked {
			for i := range payload {
				payload[i] ^= mask[i%4]
			}
		}
		switch op {
		case opPing:
			if err := w.writeFrame(opPong, payload); err != nil {
				return nil, err
			}
			continue
		case opPong:
			continue
		case opClose:
			_ = w.writeFrame(opClose, payload) // the closing handshake's answer
			return nil, io.EOF
		case opText, opBinary:
			if started {
				return nil, errors.New("websocket: a new message inside a fragmented one")
			}
			started = true
		case opContinuation:
			if !started {
				return nil, errors.New("websocket: a continuation frame with no message")
			}
		default:
			return nil, fmt.Errorf("websocket: unknown opcode %#x", op)
		}
		msg = append(msg, payload...)
		if fin {
			return msg, nil
		}
	}
}

// close sends a close frame and closes the connection.
func (w *wsConn) close() error {
	_ = w.writeFrame(opClose, binary.BigEndian.AppendUint16(nil, 1000))
	return w.conn.Close()
}

// bidiMessage is any message from the browser: a command's answer
// (type "success" or "error", with its id) or an event (type "event").
type bidiMessage struct {
	Type    string          `json:"type"`
	ID      *int64          `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   string          `json:"error"`
	Message string          `json:"message"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// bidiError is a command the browser answered with an error.
type bidiError struct {
	Command string
	Code    string // "no such frame", "invalid argument", ...
	Message string
}

func (e *bidiError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Command, e.Code, e.Message)
}

// bidiClient sends BiDi commands and hands events to onEvent. Its reader
// goroutine runs until the connection ends.
type bidiClient struct {
	ws      *wsConn
	onEvent func(method string, params json.RawMessage)

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan bidiMessage
	done    chan struct{} // closed when the reader stops
	readErr error         // why it stopped; set before done closes
}

// newBidiClient starts reading from ws; onEvent runs on the reader
// goroutine, so it must not send commands.
func newBidiClient(ws *wsConn, onEvent func(method string, params json.RawMessage)) *bidiClient {
	c := &bidiClient{ws: ws, onEvent: onEvent, pending: map[int64]chan bidiMessage{}, done: make(chan struct{})}
	go c.read()
	return c
}

func (c *bidiClient) read() {
	var err error
	defer func() {
		c.mu.Lock()
		c.readErr = err
		c.mu.Unlock()
		close(c.done)
	}()
	for {
		var b []byte
		if b, err = c.ws.readMessage(); err != nil {
			return
		}
		var m bidiMessage
		if err = json.Unmarshal(b, &m); err != nil {
			err = fmt.Errorf("bidi message %.200s: %w", b, err)
			return
		}
		if m.Type == "event" {
			if c.onEvent != nil {
				c.onEvent(m.Method, m.Params)
			}
			continue
		}
		if m.ID == nil {
			// An error about a message the browser could not read
			// names no command.
			err = fmt.Errorf("bidi: %s: %s", m.Error, m.Message)
			return
		}
		c.mu.Lock()
		ch := c.pending[*m.ID]
		delete(c.pending, *m.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// call sends a command and decodes its result into out (when not nil). It
// returns a *bidiError when the browser refuses the command, and ctx's
// error when ctx ends first.
func (c *bidiClient) call(ctx context.Context, method string, params, out any) error {
	if params == nil {
		params = struct{}{}
	}
	ch := make(chan bidiMessage, 1)
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	b, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	if err := c.ws.writeText(b); err != nil {
		return fmt.Errorf("%s: send: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Type == "error" {
			return &bidiError{Command: method, Code: m.Error, Message: m.Message}
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(m.Result, out); err != nil {
			return fmt.Errorf("%s: result %.300s: %w", method, m.Result, err)
		}
		return nil
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return fmt.Errorf("%s: connection ended: %w", method, c.readErr)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, context.Cause(ctx))
	}
}

// close closes the connection and waits for the reader to stop.
func (c *bidiClient) close() {
	_ = c.ws.close()
	<-c.done
}

// remoteString decodes a BiDi RemoteValue that must be a string.
func remoteString(raw json.RawMessage) (string, error) {
	var v struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	if v.Type != "string" {
		return "", fmt.Errorf("a %s, not a string: %s", v.Type, bytes.TrimSpace(raw))
	}
	return v.Value, nil
}
