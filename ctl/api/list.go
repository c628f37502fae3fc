package api

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// ListFormat selects the columns of WriteList, like ipvsadm -L's options.
type ListFormat struct {
	Stats          bool // --stats: counters instead of weights and connections
	Exact          bool // --exact: counters in full instead of scaled to K/M/G/T
	Rate           bool // --rate: rates instead of weights and connections
	Thresholds     bool // --thresholds: upper and lower connection thresholds
	PersistentConn bool // --persistent-conn: persistent connections
	PerLcore       bool // --per-lcore: add each lcore's counters
}

// WriteList renders a list Response as ipvsadm -L -n does, byte for byte
// (same format strings, same number scaling, same sort order), except the
// first line, which names dplb instead of the IPVS version. Services are
// sorted by address family, protocol, address and port; servers by address
// family, address and port. resp is not modified.
func WriteList(w io.Writer, resp Response, f ListFormat) error {
	bw := bufio.NewWriter(w)
	var size uint64
	if resp.Info != nil {
		size = resp.Info.ConnTableSize
	}
	fmt.Fprintf(bw, "dplb lbctl (API v%d) (size=%d)\n", Version, size)
	if resp.Info != nil && len(resp.Info.LinksDown) > 0 {
		fmt.Fprintf(bw, "Link down: %s (lbctl -L --links)\n", strings.Join(resp.Info.LinksDown, ", "))
	}
	if resp.Info != nil && len(resp.Info.DrainingVIPs) > 0 {
		fmt.Fprintf(bw, "VIP draining: %s (no service here has it; kept while its connections last)\n", strings.Join(resp.Info.DrainingVIPs, ", "))
	}
	switch {
	case f.Stats:
		fmt.Fprintf(bw, "%-33s %8s %8s %8s %8s %8s\n"+
			"  -> RemoteAddress:Port\n",
			"Prot LocalAddress:Port",
			"Conns", "InPkts", "OutPkts", "InBytes", "OutBytes")
	case f.Rate:
		fmt.Fprintf(bw, "%-33s %8s %8s %8s %8s %8s\n"+
			"  -> RemoteAddress:Port\n",
			"Prot LocalAddress:Port",
			"CPS", "InPPS", "OutPPS", "InBPS", "OutBPS")
	case f.Thresholds:
		fmt.Fprintf(bw, "%-33s %-10s %-10s %-10s %-10s\n"+
			"  -> RemoteAddress:Port\n",
			"Prot LocalAddress:Port",
			"Uthreshold", "Lthreshold", "ActiveConn", "InActConn")
	case f.PersistentConn:
		fmt.Fprintf(bw, "%-33s %-9s %-11s %-10s %-10s\n"+
			"  -> RemoteAddress:Port\n",
			"Prot LocalAddress:Port",
			"Weight", "PersistConn", "ActiveConn", "InActConn")
	default:
		fmt.Fprintf(bw, "Prot LocalAddress:Port Scheduler Flags\n"+
			"  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n")
	}

	svcs := slices.Clone(resp.Services)
	slices.SortStableFunc(svcs, compareServices)
	for _, s := range svcs {
		name := fmt.Sprintf("%s  %s", s.Protocol, addrPort(s.VIP, s.Port))
		switch {
		case f.Stats:
			fmt.Fprintf(bw, "%-33s", name)
			writeStats(bw, s.Stats, f.Exact)
		case f.Rate:
			fmt.Fprintf(bw, "%-33s", name)
			for _, n := range [...]uint64{s.Rates.CPS, s.Rates.InPPS, s.Rates.OutPPS, s.Rates.InBPS, s.Rates.OutBPS} {
				bw.WriteString(largeNum(n, f.Exact))
			}
		case f.Thresholds || f.PersistentConn:
			bw.WriteString(name)
		default:
			fmt.Fprintf(bw, "%s %s", name, s.Scheduler)
			if len(s.SchedFlags) > 0 {
				fmt.Fprintf(bw, " (%s)", strings.Join(s.SchedFlags, ","))
			}
			if s.SloppyTCP {
				bw.WriteString(" sloppy-tcp")
			}
			if s.Persistence != 0 {
				fmt.Fprintf(bw, " persistent %d", s.Persistence)
				if s.Netmask != "" && s.Netmask != "255.255.255.255" {
					fmt.Fprintf(bw, " mask %s", s.Netmask)
				}
			}
			if s.SynProxy {
				bw.WriteString(" synproxy")
			}
			if s.OnePacket {
				bw.WriteString(" ops")
			}
			if s.QUIC {
				bw.WriteString(" quic")
			}
		}
		bw.WriteString("\n")

		rss := slices.Clone(s.Servers)
		slices.SortStableFunc(rss, compareServers)
		for _, rs := range rss {
			dname := addrPort(rs.Address, rs.Port)
			switch {
			case f.Stats:
				fmt.Fprintf(bw, "  -> %-28s", dname)
				writeStats(bw, rs.Stats, f.Exact)
				bw.WriteString("\n")
			case f.Rate:
				// ipvsadm prints a server's CPS and PPS with %8u, its BPS
				// with print_largenum (the service's line uses
				// print_largenum for all five).
				fmt.Fprintf(bw, "  -> %-28s %8d %8d %8d%s%s\n", dname, rs.Rates.CPS, rs.Rates.InPPS, rs.Rates.OutPPS,
					largeNum(rs.Rates.InBPS, f.Exact), largeNum(rs.Rates.OutBPS, f.Exact))
			case f.Thresholds:
				fmt.Fprintf(bw, "  -> %-28s %-10d %-10d %-10d %-10d\n",
					dname, rs.Upper, rs.Lower, rs.ActiveConns, rs.InactiveConns)
			case f.PersistentConn:
				fmt.Fprintf(bw, "  -> %-28s %-9d %-11d %-10d %-10d\n",
					dname, rs.Weight, rs.PersistConns, rs.ActiveConns, rs.InactiveConns)
			default:
				fmt.Fprintf(bw, "  -> %-28s %-7s %-6d %-10d %-10d",
					dname, rs.Forward, rs.Weight, rs.ActiveConns, rs.InactiveConns)
				// ipvsadm's columns stay as they are; a checked server's
				// health comes after them.
				switch rs.Health {
				case "":
				case "down":
					fmt.Fprintf(bw, " down (%s)", rs.HealthReason)
				default:
					bw.WriteString(" " + rs.Health)
				}
				bw.WriteString("\n")
			}
		}
	}
	writeSNAT(bw, resp.SNAT, f)
	if f.PerLcore {
		writeLcores(bw, resp.Lcores, f.Exact)
	}
	return bw.Flush()
}

// writeSNAT lists the SNAT rules after the services, in the default and
// --stats views (no rates are estimated for them; they have no server
// settings): a line per rule and protocol, "SNAT" where a service
// has its protocol, the rule's source where a service has its VIP, then
// its addresses and connection counts (default) or its counters, in the
// services' columns (--stats; in: from the servers).
func writeSNAT(w *bufio.Writer, rules []SNATRule, f ListFormat) {
	if f.Rate || f.Thresholds || f.PersistentConn {
		return
	}
	for _, r := range rules {
		name := fmt.Sprintf("SNAT %-4s %s", r.Protocol, r.Source)
		if f.Stats {
			fmt.Fprintf(w, "%-33s", name)
			writeStats(w, r.Stats, f.Exact)
			w.WriteString("\n")
			continue
		}
		fmt.Fprintf(w, "%s from %s active %d inactive %d\n", name, strings.Join(r.Addresses, ","), r.ActiveConns, r.InactiveConns)
	}
}

// WriteSave renders services as ipvsadm -S -n does: one -A line per
// service, its local addresses (-P) and client lists (--add-blklst,
// --add-whtlst), then one -a line per real server, sorted as WriteList
// sorts them. Thresholds, which ipvsadm -S leaves out, are written with
// -x and -y when set, so that a restore keeps them.
func WriteSave(w io.Writer, services []Service) error {
	bw := bufio.NewWriter(w)
	svcs := slices.Clone(services)
	slices.SortStableFunc(svcs, compareServices)
	for _, s := range svcs {
		flag := "-t"
		if s.Protocol == "UDP" {
			flag = "-u"
		}
		name := flag + " " + addrPort(s.VIP, s.Port)
		fmt.Fprintf(bw, "-A %s -s %s", name, s.Scheduler)
		if s.Persistence != 0 {
			fmt.Fprintf(bw, " -p %d", s.Persistence)
			if s.Netmask != "" && s.Netmask != "255.255.255.255" {
				fmt.Fprintf(bw, " -M %s", s.Netmask)
			}
		}
		if len(s.SchedFlags) > 0 {
			fmt.Fprintf(bw, " -b %s", strings.Join(s.SchedFlags, ","))
		}
		if s.SynProxy {
			bw.WriteString(" --synproxy")
		}
		if s.OnePacket {
			bw.WriteString(" --ops")
		}
		if s.QUIC {
			bw.WriteString(" --quic")
		}
		bw.WriteString("\n")
		for _, l := range s.LocalAddresses {
			fmt.Fprintf(bw, "-P %s -z %s\n", name, l)
		}
		for _, p := range s.Blocklist {
			fmt.Fprintf(bw, "--add-blklst %s -k %s\n", name, p)
		}
		for _, p := range s.Allowlist {
			fmt.Fprintf(bw, "--add-whtlst %s -2 %s\n", name, p)
		}
		rss := slices.Clone(s.Servers)
		slices.SortStableFunc(rss, compareServers)
		for _, rs := range rss {
			fmt.Fprintf(bw, "-a %s -r %s %s -w %d", name, addrPort(rs.Address, rs.Port), forwardSwitch(rs.Forward), rs.Weight)
			if rs.Upper != 0 {
				fmt.Fprintf(bw, " -x %d", rs.Upper)
			}
			if rs.Lower != 0 {
				fmt.Fprintf(bw, " -y %d", rs.Lower)
			}
			bw.WriteString("\n")
		}
	}
	return bw.Flush()
}

// forwardSwitch is ipvsadm's option for a forwarding method as -L names it.
func forwardSwitch(name string) string {
	switch name {
	case "Route":
		return "-g"
	case "Tunnel":
		return "-i"
	case "FullNat":
		return "--fullnat"
	}
	return "-m"
}

func writeStats(w io.Writer, s Stats, exact bool) {
	for _, n := range [...]uint64{s.Conns, s.InPkts, s.OutPkts, s.InBytes, s.OutBytes} {
		io.WriteString(w, largeNum(n, exact))
	}
}

// largeNum is ipvsadm's print_largenum: a column of 9, numbers of 100
// million and more scaled down to K, M, G or T unless exact.
func largeNum(n uint64, exact bool) string {
	switch {
	case exact:
		s := strconv.FormatUint(n, 10)
		return fmt.Sprintf("%*s", max(9, len(s)+1), s)
	case n < 100_000_000:
		return fmt.Sprintf("%9d", n)
	case n < 1_000_000_000:
		return fmt.Sprintf("%8dK", n/1_000)
	case n < 100_000_000_000:
		return fmt.Sprintf("%8dM", n/1_000_000)
	case n < 100_000_000_000_000:
		return fmt.Sprintf("%8dG", n/1_000_000_000)
	default:
		return fmt.Sprintf("%8dT", n/1_000_000_000_000)
	}
}

// addrPort formats "192.0.2.1:80" or "[2001:db8::1]:80" as ipvsadm -n does.
// An address that does not parse is printed as given.
func addrPort(addr string, port uint16) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr + ":" + strconv.Itoa(int(port))
	}
	return netip.AddrPortFrom(a, port).String()
}

// protoNumber orders protocols as ipvsadm does (by IP protocol number).
func protoNumber(p string) int {
	switch p {
	case "TCP":
		return 6
	case "UDP":
		return 17
	case "SCTP":
		return 132
	default:
		return 256
	}
}

// compareAddr orders IPv4 before IPv6, then numerically; unparsable
// addresses go last, in string order.
func compareAddr(x, y string) int {
	a, errA := netip.ParseAddr(x)
	b, errB := netip.ParseAddr(y)
	switch {
	case errA != nil && errB != nil:
		return cmp.Compare(x, y)
	case errA != nil:
		return 1
	case errB != nil:
		return -1
	}
	return a.Compare(b)
}

func family(addr string) int {
	if a, err := netip.ParseAddr(addr); err == nil && a.Is4() {
		return 4
	}
	return 6
}

// compareServices is ipvsadm's ipvs_cmp_services without fwmarks:
// family, protocol, address, port.
func compareServices(a, b Service) int {
	return cmp.Or(
		cmp.Compare(family(a.VIP), family(b.VIP)),
		cmp.Compare(protoNumber(a.Protocol), protoNumber(b.Protocol)),
		cmp.Compare(a.Protocol, b.Protocol),
		compareAddr(a.VIP, b.VIP),
		cmp.Compare(a.Port, b.Port),
	)
}

// compareServers is ipvsadm's ipvs_cmp_dests: family, address, port.
func compareServers(a, b RealServer) int {
	return cmp.Or(
		cmp.Compare(family(a.Address), family(b.Address)),
		compareAddr(a.Address, b.Address),
		cmp.Compare(a.Port, b.Port),
	)
}

// writeLcores appends the per-lcore table of --per-lcore; numbers are
// scaled as the --stats columns are (largeNum pads them to 9).
func writeLcores(w io.Writer, lcores []Lcore, exact bool) {
	fmt.Fprintf(w, "%-5s %9s %9s %9s %9s %9s %9s %6s %8s\n", "Lcore", "RxPkts", "TxPkts", "Drops", "HandedOff", "HandedIn", "Conns", "Busy%", "Cyc/Pkt")
	for _, l := range lcores {
		fmt.Fprintf(w, "%-5d %9s %9s %9s %9s %9s %9s %6.1f %8.0f\n", l.ID,
			strings.TrimSpace(largeNum(l.RxPackets, exact)), strings.TrimSpace(largeNum(l.TxPackets, exact)),
			strings.TrimSpace(largeNum(l.Drops, exact)), strings.TrimSpace(largeNum(l.HandedOff, exact)),
			strings.TrimSpace(largeNum(l.HandedIn, exact)), strings.TrimSpace(largeNum(l.Connections, exact)),
			l.BusyPercent, l.CyclesPerPacket)
	}
}

// WriteConns renders a connection listing as ipvsadm -L -n -c does.
func WriteConns(w io.Writer, resp Response) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("IPVS connection entries\n")
	fmt.Fprintf(bw, "pro expire state       source             virtual            destination\n")
	for _, c := range resp.Conns {
		fmt.Fprintf(bw, "%-3s %02d:%02d  %-11s %-18s %-18s %s", c.Protocol,
			c.ExpiresSecs/60, c.ExpiresSecs%60, c.State, c.Client, c.Virtual, c.Destination)
		if c.Local != "" {
			fmt.Fprintf(bw, " from %s", c.Local) // FullNAT: the local address and port
		}
		bw.WriteString("\n")
	}
	if resp.ConnsTruncated {
		fmt.Fprintf(bw, "(%d shown; more matched: narrow with -t/-u or --client)\n", len(resp.Conns))
	}
	return bw.Flush()
}
