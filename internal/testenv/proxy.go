package testenv

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to a server, and can
// freeze: while frozen it moves no bytes either way and accepts no new
// connections' data, so the server looks hung (as a SIGSTOPped server does)
// without stopping a server other tests share.
type Proxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	thawed chan struct{} // closed while the proxy moves bytes
	conns  map[net.Conn]struct{}
}

// StartProxy starts a proxy to target (host:port), closed when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, thawed: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	close(p.thawed)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Freeze stops all traffic until Thaw; connections stay open.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default: // already frozen
	}
}

// Thaw lets traffic through again.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

// gate returns a channel that is closed while the proxy is thawed.
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.thawed
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

// track records a connection pair, or closes it and reports false when the
// proxy is closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies from src to dst, waiting at the gate before each write.
func (p *Proxy) pipe(src, dst net.Conn) {
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF, or a side closed
		}
	}
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.Thaw()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}
