package health_test

import (
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/dplb/dplb/conf"
)

// dnsReply answers a query with rcode (with stray, with another id).
func dnsReply(rcode dnsmessage.RCode, stray bool) func([]byte) []byte {
	return func(b []byte) []byte {
		var p dnsmessage.Parser
		h, err := p.Start(b)
		if err != nil {
			return nil
		}
		q, err := p.Question()
		if err != nil {
			return nil
		}
		if stray {
			h.ID++
		}
		h.Response, h.RCode = true, rcode
		out, err := (&dnsmessage.Message{Header: h, Questions: []dnsmessage.Question{q}}).Pack()
		if err != nil {
			return nil
		}
		return out
	}
}

// TestProbeDNS: keepalived's DNS_CHECK: a reply to the query with rcode
// NOERROR passes; another rcode, a reply that is not DNS, silence and a
// closed port fail, each saying why, and so does a reply to another
// query.
func TestProbeDNS(t *testing.T) {
	ok := udpServer(t, dnsReply(dnsmessage.RCodeSuccess, false))
	nx := udpServer(t, dnsReply(dnsmessage.RCodeNameError, false))
	stray := udpServer(t, dnsReply(dnsmessage.RCodeSuccess, true))
	notDNS := udpServer(t, func([]byte) []byte { return []byte("rs2\n") })
	dns := func(name, typ string) conf.HealthCheck {
		return conf.HealthCheck{Type: "dns", DNSName: name, DNSType: typ, Timeout: probeTimeout}
	}
	tests := []struct {
		name   string
		addr   string
		check  conf.HealthCheck
		ok     bool
		reason string
	}{
		{"NOERROR, the defaults (SOA .)", ok, conf.HealthCheck{Type: "dns"}, true, ""},
		{"NOERROR, A", ok, dns("www.example.com", "A"), true, ""},
		{"NXDOMAIN", nx, dns("nope.example.com", "A"), false, "DNS reply NXDOMAIN to A nope.example.com."},
		{"not DNS", notDNS, dns(".", "SOA"), false, "reply is not DNS (4 bytes)"},
		{"another query's reply", stray, dns(".", "SOA"), false, "reply is not DNS, or not an answer to the query (17 bytes)"},
		{"closed port", closedPort(t), dns(".", "SOA"), false, "port unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { probe(t, target(tt.addr, tt.check), tt.ok, tt.reason) })
	}
}
