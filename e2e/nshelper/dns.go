package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsserve is a small DNS server for the health checks' tests: every
// query gets NOERROR (an A query one answer, addr), but names under
// "nxdomain." get NXDOMAIN.
func dnsserve(args []string) error {
	fs := flag.NewFlagSet("dnsserve", flag.ContinueOnError)
	listen := fs.String("listen", ":53", "UDP listen address")
	addr := fs.String("addr", "192.0.2.53", "the address an A query gets")
	if err := fs.Parse(args); err != nil {
		return err
	}
	a, err := netip.ParseAddr(*addr)
	if err != nil || !a.Is4() {
		return fmt.Errorf("dnsserve: -addr %q is not an IPv4 address", *addr)
	}
	c, err := net.ListenPacket("udp", *listen)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Printf("ready %s\n", c.LocalAddr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); c.Close() }()
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if out := dnsAnswer(buf[:n], a.As4()); out != nil {
			c.WriteTo(out, from)
		}
	}
}

// dnsAnswer is the reply to query q; nil for what is not a query.
func dnsAnswer(q []byte, a [4]byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil || h.Response {
		return nil
	}
	question, err := p.Question()
	if err != nil {
		return nil
	}
	m := dnsmessage.Message{Header: dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired},
		Questions: []dnsmessage.Question{question}}
	switch {
	case strings.HasSuffix(question.Name.String(), "nxdomain."):
		m.RCode = dnsmessage.RCodeNameError
	case question.Type == dnsmessage.TypeA:
		m.Answers = []dnsmessage.Resource{{
			Header: dnsmessage.ResourceHeader{Name: question.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
			Body:   &dnsmessage.AResource{A: a},
		}}
	}
	out, err := m.Pack()
	if err != nil {
		return nil
	}
	return out
}
