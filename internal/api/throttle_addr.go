package api

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// clientAddr returns the address r's wrong tokens count against. It is the
// connection's peer (the host of r.RemoteAddr), unless the peer is one of
// Config.TrustedProxies: then it is the right-most hop of the forwarding
// header that is no trusted proxy (see forwardedClient). An IPv4 address
// counts on its own; an IPv6 address counts with its /64, which one
// subscriber usually has whole ("2001:db8:1:2::/64"). A RemoteAddr that names
// no IP address (a Unix socket's) is returned as it is.
func (a *api) clientAddr(r *http.Request) string {
	peer, ok := parseHop(r.RemoteAddr)
	if !ok {
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			return host
		}
		return r.RemoteAddr
	}
	if a.trusts(peer) {
		peer = a.forwardedClient(r.Header, peer)
	}
	return counterAddr(peer)
}

// trusts reports whether addr is in one of Config.TrustedProxies.
func (a *api) trusts(addr netip.Addr) bool {
	for _, p := range a.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// forwardedClient returns the client a trusted proxy, peer, forwarded the
// request for: walking the hops of X-Forwarded-For, or of Forwarded (RFC
// 7239, its for= parameters), from the right, the first that is no trusted
// proxy. A proxy appends the address it received the request from to what
// the request came with, so the hops right of that one are trusted proxies'
// and the ones left of it are the client's to write: they are never read.
//
// When every hop is a trusted proxy, it is the left-most. When a hop names no
// address ("unknown", an obfuscated name, garbage), the walk stops at the
// trusted proxy that wrote it. A request carrying both headers, or neither,
// counts against peer: a proxy writes one of them, and the other may be the
// client's invention.
func (a *api) forwardedClient(h http.Header, peer netip.Addr) netip.Addr {
	xff, fwd := h.Values("X-Forwarded-For"), h.Values("Forwarded")
	var hops []string
	switch {
	case len(xff) > 0 && len(fwd) > 0:
		return peer
	case len(xff) > 0:
		for _, v := range xff {
			hops = append(hops, strings.Split(v, ",")...)
		}
	case len(fwd) > 0:
		hops = forwardedFor(fwd)
	default:
		return peer
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		addr, ok := parseHop(hops[i])
		if !ok {
			return client
		}
		if !a.trusts(addr) {
			return addr
		}
		client = addr
	}
	return client
}

// forwardedFor returns the for= value of each element of Forwarded header
// values, "" for an element without one.
func forwardedFor(values []string) []string {
	var hops []string
	for _, v := range values {
		for _, elem := range splitQuoted(v, ',') {
			hop := ""
			for _, pair := range splitQuoted(elem, ';') {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "for") {
					hop = unquote(strings.TrimSpace(val))
				}
			}
			hops = append(hops, hop)
		}
	}
	return hops
}

// splitQuoted splits s at sep outside double-quoted strings.
func splitQuoted(s string, sep byte) []string {
	var parts []string
	quoted, escaped, start := false, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// unquote returns the content of an RFC 7230 quoted-string, or s as it is
// when it is not one.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		if s[i] == '\\' && i+1 < len(s)-1 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseHop parses one hop: an IP address, with or without a port, IPv6 in
// brackets or not ("192.0.2.1", "192.0.2.1:80", "[2001:db8::1]:80",
// "2001:db8::1"). An IPv4-mapped IPv6 address is the IPv4 address; a zone is
// dropped.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	addr, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
				return netip.Addr{}, false
			}
			if addr, err = netip.ParseAddr(s[1 : len(s)-1]); err != nil {
				return netip.Addr{}, false
			}
		} else {
			addr = ap.Addr()
		}
	}
	return addr.Unmap().WithZone(""), true
}

// counterAddr is the name addr's failures are counted under: an IPv4
// address itself, an IPv6 address's /64.
func counterAddr(addr netip.Addr) string {
	if addr.Is4() {
		return addr.String()
	}
	return netip.PrefixFrom(addr, 64).Masked().String()
}

// maskAll returns ps with their host bits cleared.
func maskAll(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		out[i] = p.Masked()
	}
	return out
}
