package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/dplb/dplb/lcore/conn"
)

// IPv6 cases (issue #16): nat6 and dr6 are nat and dr with an IPv6 VIP,
// IPv6 real servers (NAT66; DR) and IPv6 clients, on the same ports with
// an IPv6 address beside the IPv4 one. Every IPv6 address is the IPv4
// case's address in the low 32 bits of a /96 (2001:db8:1::203.0.113.10
// for 203.0.113.10), so the two runs differ in the address family alone.

// addrSet is a case's addresses: the IPv4 ones, or their IPv6 forms.
type addrSet struct {
	clientNet, serverNet string // "" for IPv4; else the /96 with "::"
}

var (
	addrs4 = addrSet{}
	addrs6 = addrSet{clientNet: "2001:db8:1::", serverNet: "fd00:1::"}
)

var methodName6 = map[string]string{"nat": "VS/NAT (NAT66), IPv6", "dr": "VS/DR, IPv6"}

func (a addrSet) client(v4 string) string { return a.clientNet + v4 }
func (a addrSet) server(v4 string) string { return a.serverNet + v4 }

// clients maps an IPv4 client range first-last.
func (a addrSet) clients(r string) string {
	lo, hi, _ := strings.Cut(r, "-")
	return a.client(lo) + "-" + a.client(hi)
}

func (a addrSet) vip() string { return a.client("203.0.113.10") }

func (a addrSet) vipPort() string {
	if a.clientNet == "" {
		return a.vip() + ":80"
	}
	return "[" + a.vip() + "]:80"
}

func (a addrSet) lbServer() string { return a.server("198.51.100.1") }

func (a addrSet) servers() string {
	return a.server("198.51.100.11") + "-" + a.server("198.51.100.12")
}

// address6 is a port's address6 line of lbd's configuration ("" for
// IPv4 cases): lbd's IPv4 address in the network, a /64.
func (a addrSet) address6(net, v4 string) string {
	if net == "" {
		return ""
	}
	return fmt.Sprintf("    address6: %s%s/64\n", net, v4)
}

// IPv6Row is an IPv6 case beside its IPv4 counterpart in the same run:
// the highest received rates and lbd's busy cycles per packet there.
type IPv6Row struct {
	V4    string  `json:"ipv4_case"`
	V6    string  `json:"ipv6_case"`
	V4PPS float64 `json:"ipv4_max_rx_pps"`
	V6PPS float64 `json:"ipv6_max_rx_pps"`
	Ratio float64 `json:"ipv6_over_ipv4"`
	V4CPP float64 `json:"ipv4_cycles_per_packet,omitempty"`
	V6CPP float64 `json:"ipv6_cycles_per_packet,omitempty"`
}

// IPv6Section is the report's "IPv6 beside IPv4": the rate pairs and
// what a connection costs in memory, from lcore/conn's own tables.
type IPv6Section struct {
	Rows []IPv6Row `json:"pairs"`
	// BytesPerConn4 and BytesPerConn6 are a table's memory (entries,
	// index, free list, and for IPv6 the address array) over its entries
	// (conn.BytesPerConn), on an lcore without and with IPv6 services.
	BytesPerConn4 float64 `json:"bytes_per_conn_ipv4"`
	BytesPerConn6 float64 `json:"bytes_per_conn_ipv6"`
	EntryBytes    int     `json:"entry_bytes"`
	Addrs6Bytes   int     `json:"ipv6_address_bytes"`
}

// ipv6Beside pairs every IPv6 case with the IPv4 case of the same name
// without the "6"; nil when no IPv6 case ran.
func ipv6Beside(cases []*Case) *IPv6Section {
	byName := map[string]*Case{}
	for _, c := range cases {
		byName[c.Name] = c
	}
	best := func(c *Case) (pps, cpp float64) {
		i := maxStep(c)
		if i < 0 {
			return 0, 0
		}
		if i < len(c.Metrics) {
			cpp = c.Metrics[i].CyclesPerPacket
		}
		return c.steps[i].SrvPPS, cpp
	}
	var s *IPv6Section
	for _, c := range cases {
		if c.Spec == nil || !c.Spec.IPv6 {
			continue
		}
		if s == nil {
			s = &IPv6Section{EntryBytes: conn.ConnSize, Addrs6Bytes: conn.Addrs6Size}
			s.BytesPerConn4, _ = conn.BytesPerConn(1<<16, false, false)
			s.BytesPerConn6, _ = conn.BytesPerConn(1<<16, true, false)
		}
		v4 := byName[strings.Replace(c.Name, c.Spec.Method+"6", c.Spec.Method, 1)]
		if v4 == nil {
			continue
		}
		r := IPv6Row{V4: v4.Name, V6: c.Name}
		r.V4PPS, r.V4CPP = best(v4)
		r.V6PPS, r.V6CPP = best(c)
		if r.V4PPS > 0 {
			r.Ratio = r.V6PPS / r.V4PPS
		}
		s.Rows = append(s.Rows, r)
	}
	return s
}

// ipv6Section writes the report's section.
func ipv6Section(b *bytes.Buffer, s *IPv6Section) {
	if s == nil {
		return
	}
	p := func(f string, a ...any) { fmt.Fprintf(b, f, a...) }
	p("\n## IPv6 beside IPv4 (issue #16)\n\n")
	p("Each IPv6 case is its IPv4 case with every address moved into a /96 (VIP `2001:db8:1::203.0.113.10`, real servers `fd00:1::198.51.100.11-12`, clients likewise), NAT66 or DR, in this run. IPv6 frames are the smallest IPv6 TCP segment, 74 bytes (78 on the wire) against IPv4's 60 (64), unless `-size` is larger. Highest received rate of each, and lbd's busy cycles per packet at that step.\n\n")
	p("| IPv4 case | IPv6 case | IPv4 Mpps | IPv6 Mpps | IPv6 / IPv4 | cycles/pkt IPv4 / IPv6 |\n|---|---|---|---|---|---|\n")
	if len(s.Rows) == 0 {
		p("| - | - | - | - | - | - |\n")
	}
	for _, r := range s.Rows {
		p("| %s | %s | %s | %s | %s | %s / %s |\n", r.V4, r.V6, mpps(r.V4PPS), mpps(r.V6PPS), ratio(r.Ratio),
			dash(r.V4CPP, "%.0f"), dash(r.V6CPP, "%.0f"))
	}
	idx := s.BytesPerConn4 - float64(s.EntryBytes)
	p("\nMemory per connection (lcore/conn's tables: memory over entries, `conn.BytesPerConn`): ")
	p("IPv4 **%.0f bytes** (the %d-byte entry, %.0f of index cells, free list and expiry bound); ", s.BytesPerConn4, s.EntryBytes, idx)
	p("IPv6 **%.0f bytes** (the same entry with its addresses folded to 32 bits, the same %.0f, and a %d-byte slot of full addresses in a side array). ", s.BytesPerConn6, idx, s.Addrs6Bytes)
	p("An lcore allocates the side array for every entry once it has an IPv6 service, so there IPv4 connections cost %.0f bytes too; without IPv6 services, %.0f. ", s.BytesPerConn6, s.BytesPerConn4)
	p("Lookups: `BenchmarkLookup6` beside `BenchmarkLookupHit` (perf/README.md).\n")
}
