package api

import (
	"net/http"
	"net/netip"
	"testing"
)

// TestClientAddr: the address wrong tokens count against, from the peer and
// the forwarding headers of trusted proxies; IPv6 by /64.
func TestClientAddr(t *testing.T) {
	t.Parallel()
	a := &api{trusted: maskAll([]netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("fd00::/8"),
	})}
	for _, c := range []struct {
		name, peer string
		header     http.Header
		want       string
	}{
		{"IPv4 peer", "192.0.2.1:5000", nil, "192.0.2.1"},
		{"IPv6 peer by /64", "[2001:db8:1:2:3:4:5:6]:5000", nil, "2001:db8:1:2::/64"},
		{"IPv4-mapped peer", "[::ffff:192.0.2.7]:5000", nil, "192.0.2.7"},
		{"zone dropped", "[fe80::1%eth0]:5000", nil, "fe80::/64"},
		{"unix socket", "@", nil, "@"},
		{"untrusted peer: XFF ignored", "192.0.2.1:5000", http.Header{"X-Forwarded-For": {"198.51.100.1"}}, "192.0.2.1"},
		{"untrusted peer: Forwarded ignored", "192.0.2.1:5000", http.Header{"Forwarded": {"for=198.51.100.1"}}, "192.0.2.1"},
		{"trusted peer without headers", "10.0.0.1:5000", nil, "10.0.0.1"},
		{"right-most untrusted hop", "10.0.0.1:5000", http.Header{"X-Forwarded-For": {"203.0.113.1, 198.51.100.2, 10.3.3.3"}}, "198.51.100.2"},
		{"hops over several header lines", "10.0.0.1:5000", http.Header{"X-Forwarded-For": {"203.0.113.1", "198.51.100.3, 10.3.3.3"}}, "198.51.100.3"},
		{"hop with a port", "10.0.0.1:5000", http.Header{"X-Forwarded-For": {"198.51.100.4:4711"}}, "198.51.100.4"},
		{"IPv6 hop by /64", "10.0.0.1:5000", http.Header{"X-Forwarded-For": {"2001:db8:aa:bb:1::9"}}, "2001:db8:aa:bb::/64"},
		{"bracketed IPv6 hop", "10.0.0.1:5000", http.Header{"X-Forwarded-For": {"[2001:db8:aa:cc::9]"}}, "2001:db8:aa:cc::/64"},
		{"all hops trusted: the left-most", "10.0.0.1:5000", http.Header{"X-Forwarded-For": {"10.7.7.7, fd00::1"}}, "10.7.7.7"},
		{"garbage hop: the proxy that wrote it", "10.0.0.1:5000", http.Header{"X-Forwarded-For": {"198.51.100.5, nonsense, 10.4.4.4"}}, "10.4.4.4"},
		{"empty XFF: the peer", "10.0.0.1:5000", http.Header{"X-Forwarded-For": {""}}, "10.0.0.1"},
		{"Forwarded", "10.0.0.1:5000", http.Header{"Forwarded": {`for=203.0.113.1;proto=http, for="198.51.100.6:80";by=10.0.0.1`}}, "198.51.100.6"},
		{"Forwarded IPv6", "10.0.0.1:5000", http.Header{"Forwarded": {`For="[2001:db8:cafe::17]:4711"`}}, "2001:db8:cafe::/64"},
		{"Forwarded quoted comma", "10.0.0.1:5000", http.Header{"Forwarded": {`for=198.51.100.7;ext="a,b"`}}, "198.51.100.7"},
		{"Forwarded unknown: the proxy", "10.0.0.1:5000", http.Header{"Forwarded": {"for=198.51.100.8, for=unknown"}}, "10.0.0.1"},
		{"Forwarded without for: the proxy", "10.0.0.1:5000", http.Header{"Forwarded": {"proto=https"}}, "10.0.0.1"},
		{"both headers: the peer", "10.0.0.1:5000", http.Header{"X-Forwarded-For": {"198.51.100.9"}, "Forwarded": {"for=198.51.100.10"}}, "10.0.0.1"},
		{"IPv6 trusted proxy", "[fd00::5]:5000", http.Header{"X-Forwarded-For": {"198.51.100.11"}}, "198.51.100.11"},
	} {
		r := &http.Request{RemoteAddr: c.peer, Header: c.header}
		if r.Header == nil {
			r.Header = http.Header{}
		}
		if got := a.clientAddr(r); got != c.want {
			t.Errorf("%s: clientAddr(%s, %v) = %q, want %q", c.name, c.peer, c.header, got, c.want)
		}
	}
}

// TestClientAddrByNetwork: every address of an IPv6 /64 is one client, the
// next /64 another; IPv4 addresses are each their own.
func TestClientAddrByNetwork(t *testing.T) {
	t.Parallel()
	a := &api{}
	at := func(peer string) string {
		return a.clientAddr(&http.Request{RemoteAddr: peer, Header: http.Header{}})
	}
	if x, y := at("[2001:db8:1:2::1]:1"), at("[2001:db8:1:2:ffff:ffff:ffff:ffff]:2"); x != y {
		t.Errorf("one /64 counted as two: %q and %q", x, y)
	}
	if x, y := at("[2001:db8:1:2::1]:1"), at("[2001:db8:1:3::1]:1"); x == y {
		t.Errorf("two /64s counted as one: %q", x)
	}
	if x, y := at("192.0.2.1:1"), at("192.0.2.2:1"); x == y {
		t.Errorf("two IPv4 addresses counted as one: %q", x)
	}
}
