package health

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsTypes maps a dns check's dns_type to its query type.
var dnsTypes = map[string]dnsmessage.Type{
	"A": dnsmessage.TypeA, "AAAA": dnsmessage.TypeAAAA, "NS": dnsmessage.TypeNS, "CNAME": dnsmessage.TypeCNAME,
	"SOA": dnsmessage.TypeSOA, "MX": dnsmessage.TypeMX, "TXT": dnsmessage.TypeTXT,
}

// probeDNS is keepalived's DNS_CHECK: one query over UDP (a random id,
// recursion desired, class IN); the server passes when its reply answers
// that query (same id, a response) with rcode NOERROR. What the answer
// holds is not looked at, as keepalived does not.
func probeDNS(ctx context.Context, t Target) (bool, string) {
	c := t.Check
	name := c.DNSName
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	qname, err := dnsmessage.NewName(name)
	if err != nil {
		return false, "dns_name: " + truncate(err.Error())
	}
	id := uint16(rand.Uint32())
	q := dnsmessage.Question{Name: qname, Type: dnsTypes[c.DNSType], Class: dnsmessage.ClassINET}
	query, err := (&dnsmessage.Message{Header: dnsmessage.Header{ID: id, RecursionDesired: true}, Questions: []dnsmessage.Question{q}}).Pack()
	if err != nil {
		return false, "query: " + truncate(err.Error())
	}
	reply, why := udpExchange(ctx, t, query)
	if why != "" {
		return false, why
	}
	// As keepalived: the first reply must be the answer (the socket is
	// connected to the server: nothing else reaches it).
	var p dnsmessage.Parser
	h, err := p.Start(reply)
	switch {
	case err != nil:
		return false, fmt.Sprintf("reply is not DNS (%d bytes)", len(reply))
	case h.ID != id || !h.Response:
		return false, fmt.Sprintf("reply is not DNS, or not an answer to the query (%d bytes)", len(reply))
	case h.RCode != dnsmessage.RCodeSuccess:
		return false, fmt.Sprintf("DNS reply %s to %s %s", rcodeName(h.RCode), c.DNSType, name)
	}
	return true, ""
}

// rcodeName is rcode's mnemonic, as dig prints it.
func rcodeName(rc dnsmessage.RCode) string {
	switch rc {
	case dnsmessage.RCodeFormatError:
		return "FORMERR"
	case dnsmessage.RCodeServerFailure:
		return "SERVFAIL"
	case dnsmessage.RCodeNameError:
		return "NXDOMAIN"
	case dnsmessage.RCodeNotImplemented:
		return "NOTIMP"
	case dnsmessage.RCodeRefused:
		return "REFUSED"
	}
	return fmt.Sprintf("rcode %d", rc)
}
