package api

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// lbctl trace: what lbd would do with one flow's next packet, and why.

// OpTrace traces the flow of Request.Service from Request.Client (and,
// with Request.Reply, the real server's reply to it) through the worker
// that owns it; the answer is Response.Trace. Nothing changes.
const OpTrace = "trace"

// Trace is lbd's answer to OpTrace.
type Trace struct {
	Flow     string        `json:"flow"`  // "TCP 203.0.113.7:40000 -> 192.0.2.10:80"
	Reply    bool          `json:"reply"` // the real server's packet to the client
	Steering TraceSteering `json:"steering"`
	// Generation is the snapshot the owner answered from.
	Generation uint64        `json:"generation"`
	Service    *TraceService `json:"service,omitempty"` // nil: no such service
	// Conn is the connection entry the packet belongs to; nil when none.
	Conn *TraceConn `json:"conn,omitempty"`
	// Decision is the real server a new connection would get now; nil
	// when the packet belongs to an entry or opens none.
	Decision *TraceDecision `json:"decision,omitempty"`
	// Template is a persistent service's template for the client's
	// network, when one lives.
	Template *TraceTemplate `json:"template,omitempty"`
	Table    TraceTable     `json:"table"`
	Verdict  TraceVerdict   `json:"verdict"`
}

// TraceSteering says which worker owns the flow, and why.
type TraceSteering struct {
	Owner   int    `json:"owner"`   // the worker (lcore index) that owns the flow and answered
	Workers int    `json:"workers"` // how many workers share the flows
	Hash    uint32 `json:"hash"`    // Toeplitz hash of the client's address and port
	Key     string `json:"key"`     // "per-boot" (drawn at start) or "configured" (dataplane.steering_key)
	Port    string `json:"port"`    // the port the packet arrives on
	// RSS is how that port's NIC spreads packets: "aligned" (it hashes
	// the client endpoint with the steering key: the owner's queue gets
	// the packet) or "software" (any queue; a worker hands the packet to
	// the owner over a ring).
	RSS string `json:"rss"`
}

// TraceService is the virtual service and its servers as the owner sees
// them.
type TraceService struct {
	Name        string        `json:"name"` // "-t VIP:port"
	Scheduler   string        `json:"scheduler"`
	Persistence uint32        `json:"persistence,omitempty"` // seconds
	SloppyTCP   bool          `json:"sloppy_tcp,omitempty"`
	SynProxy    bool          `json:"synproxy,omitempty"` // lbd answers SYNs with cookies
	Servers     []TraceServer `json:"servers"`
}

// TraceServer is one real server, with the owner's own connection counts
// (the counts its scheduler uses).
type TraceServer struct {
	Address  string `json:"address"` // address:port
	Forward  string `json:"forward"` // "Masq" | "Route" | "Tunnel" | "FullNat"
	Weight   int    `json:"weight"`  // the weight the lcores schedule with now
	Upper    int    `json:"upper,omitempty"`
	Active   uint32 `json:"active"`
	Inactive uint32 `json:"inactive"`
	// State: "available", "quiescent" (weight 0), "over threshold"
	// (connections at -x), "expiring" (failed; connections end).
	State string `json:"state"`
}

// TraceConn is the connection entry.
type TraceConn struct {
	Conn
	Direction string `json:"direction"` // "client to server" or "server to client": the packet's
	// OneWayOnly: the reply traced has no entry, but the client's
	// direction has this one, a DR or TUN connection whose replies do not
	// pass through lbd.
	OneWayOnly bool `json:"one_way_only,omitempty"`
	// SYNReschedules: a SYN from the client would end this entry and be
	// scheduled afresh (TIME_WAIT, CLOSE, or DR/TUN in FIN_WAIT).
	SYNReschedules bool `json:"syn_reschedules,omitempty"`
}

// TraceDecision is the real server a new connection would get now. It is
// a dry pick: lbd ran the owner's scheduler on a copy of its state, so the
// next real pick makes the same choice if nothing else comes first.
type TraceDecision struct {
	Destination string `json:"destination,omitempty"` // address:port; "" when none would be chosen
	By          string `json:"by"`                    // "template" or "scheduler"
	Predicted   bool   `json:"predicted"`             // false: this scheduler cannot be previewed
}

// TraceTemplate is a persistence template.
type TraceTemplate struct {
	Destination string `json:"destination,omitempty"` // "" when its server is gone
	ExpiresSecs uint64 `json:"expires_secs"`
}

// TraceTable is the owner's connection table.
type TraceTable struct {
	Entries  int `json:"entries"`
	Capacity int `json:"capacity"`
}

// TraceVerdict is what happens to the packet.
type TraceVerdict struct {
	Drop   string `json:"drop,omitempty"`   // the drop reason (a dplb_lcore_drops_total reason); "" when forwarded
	Why    string `json:"why,omitempty"`    // the drop reason in words
	To     string `json:"to,omitempty"`     // where it goes: address:port
	Port   string `json:"port,omitempty"`   // out of this port
	Via    string `json:"via,omitempty"`    // next hop
	Method string `json:"method,omitempty"` // "Masq" | "Route" | "Tunnel" | "FullNat"
	Kernel string `json:"kernel,omitempty"` // to the kernel through this interface (Port's kni): addressed to the port itself
	MAC    bool   `json:"mac_known"`        // the next hop's MAC is known
	Note   string `json:"note,omitempty"`   // what else an operator should know
}

// parseTrace parses trace's options: -t|-u VIP:port --client IP:port
// [--reply RIP:port], plus -o and --socket.
func parseTrace(args []string) (Command, error) {
	c := Command{Request: Request{Op: OpTrace}}
	var svcFlag, svcVal string
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(args[i], "=")
		if !strings.HasPrefix(name, "--") && len(name) > 2 {
			name, val, hasVal = name[:2], name[2:], true // -t192.0.2.1:80, -ojson
		}
		if spec, ok := longOpts[name]; ok {
			name = spec.name
		}
		switch name {
		case "-h":
			c.Op = CmdHelp
			return c, nil
		case "-n":
			continue
		case "-t", "-u", "--client", "--reply", "-o", "--socket":
		default:
			return Command{}, fmt.Errorf("trace: unknown option %q", args[i])
		}
		if !hasVal {
			if i+1 >= len(args) {
				return Command{}, fmt.Errorf("trace: option %q needs a value", name)
			}
			i++
			val = args[i]
		}
		switch name {
		case "-t", "-u":
			if svcFlag != "" && svcFlag != name {
				return Command{}, fmt.Errorf("trace: %s and %s: one service at a time", svcFlag, name)
			}
			svcFlag, svcVal = name, val
		case "--client":
			if _, err := endpoint("--client", val); err != nil {
				return Command{}, err
			}
			c.Client = val
		case "--reply":
			if _, err := endpoint("--reply", val); err != nil {
				return Command{}, err
			}
			c.Reply = val
		case "-o":
			if val != "json" && val != "text" {
				return Command{}, fmt.Errorf("unsupported output format %q (want json or text)", val)
			}
			c.JSON = val == "json"
		case "--socket":
			if val == "" {
				return Command{}, fmt.Errorf("option %q needs a value", "--socket")
			}
			c.Socket = val
		}
	}
	if svcFlag == "" {
		return Command{}, fmt.Errorf("trace needs a service: -t|-u VIP:port")
	}
	if c.Client == "" {
		return Command{}, fmt.Errorf("trace needs the client: --client IP:port")
	}
	s, err := parseService(svcFlag, svcVal)
	if err != nil {
		return Command{}, err
	}
	c.Service = &s
	return c, nil
}

// endpoint parses an IPv4 address:port or [IPv6]:port, naming the option
// in errors.
func endpoint(opt, s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || !checkAddr(ap.Addr().String()) || ap.Port() == 0 {
		return netip.AddrPort{}, fmt.Errorf("%s %q: want an address and a port, e.g. 203.0.113.7:40000 or [2001:db8::7]:40000", opt, s)
	}
	return ap, nil
}

// TraceEndpoint parses the address:port of OpTrace's Client and Reply.
func TraceEndpoint(opt, s string) (netip.AddrPort, error) { return endpoint(opt, s) }

// dropWords explains the drop reasons a trace can give.
var dropWords = map[string]string{
	"no_service":         "the VIP has no service on this protocol and port",
	"to_local":           "addressed to one of lbd's own port addresses: dropped, or given to the kernel on a port with a kernel interface (kni)",
	"no_conn":            "no connection has this packet's addresses and it is not to a VIP (lbd is not a router)",
	"no_dest":            "the scheduler finds no available server: every one quiescent (weight 0) or over its upper threshold",
	"table_full":         "the owner's connection table is full (its flood defense may first evict an embryonic or idle entry)",
	"dest_down":          "the server failed its health check and its connections end at their next packet (on_failure: expire)",
	"no_route":           "no port reaches the destination",
	"no_neighbour":       "the next hop's MAC is not known yet: lbd asks ARP for it and drops this packet",
	"client_blocked":     "the service's blocklist names the client: no new connection (those it has go on)",
	"client_not_allowed": "the service's allowlist does not name the client: no new connection (those it has go on)",
	"kernel_full":        "for a port's kernel interface (kni), whose ring was full",
}

// DropWords explains a drop reason, "" for one a trace does not give.
func DropWords(reason string) string { return dropWords[reason] }

// WriteTrace prints a trace for a human, one fact a line.
func WriteTrace(w io.Writer, t *Trace) error {
	if t == nil {
		return fmt.Errorf("lbd sent no trace")
	}
	bw := bufio.NewWriter(w)
	line := func(label, format string, a ...any) {
		fmt.Fprintf(bw, "%-9s "+format+"\n", append([]any{label}, a...)...)
	}
	dir := "client to VIP"
	if t.Reply {
		dir = "real server to client"
	}
	line("Flow", "%s (%s)", t.Flow, dir)
	s := t.Steering
	line("Owner", "lcore %d of %d: Toeplitz hash %#08x of the client's address and port (%s key) mod %d", s.Owner, s.Workers, s.Hash, s.Key, s.Workers)
	if s.RSS == "aligned" {
		line("", "arrives on port %s, RSS aligned: the NIC hashes the client endpoint with the same key, lcore %d's queue gets it", s.Port, s.Owner)
	} else {
		line("", "arrives on port %s, RSS in software: the NIC may use any queue; the lcore that gets it hands it to lcore %d", s.Port, s.Owner)
	}
	if sv := t.Service; sv != nil {
		extra := ""
		if sv.Persistence > 0 {
			extra += fmt.Sprintf(" -p %d", sv.Persistence)
		}
		if sv.SloppyTCP {
			extra += " (sloppy: any TCP packet opens a connection)"
		}
		if sv.SynProxy {
			extra += " --synproxy"
		}
		line("Service", "%s -s %s%s (snapshot %d)", sv.Name, sv.Scheduler, extra, t.Generation)
		for _, r := range sv.Servers {
			fmt.Fprintf(bw, "  -> %-21s %-6s weight %-5d active %d inactive %d on lcore %d: %s\n",
				r.Address, r.Forward, r.Weight, r.Active, r.Inactive, s.Owner, r.State)
		}
	} else {
		line("Service", "none (snapshot %d)", t.Generation)
	}
	if c := t.Conn; c != nil {
		label := "Conn"
		if c.OneWayOnly {
			line(label, "none for the reply; the client's direction has a %s entry: its replies do not pass through lbd", c.Destination)
			label = ""
		}
		line(label, "%s %s, expires in %d s: client %s, virtual %s, server %s", c.Protocol, c.State, c.ExpiresSecs, c.Client, c.Virtual, c.Destination)
		if c.Local != "" {
			line("", "from the local address %s: the server answers it", c.Local)
		}
		if !c.OneWayOnly {
			line("", "the packet travels %s", c.Direction)
		}
		if c.SYNReschedules {
			line("", "a SYN from the client would end this entry and be scheduled afresh")
		}
	} else {
		line("Conn", "none")
	}
	if tp := t.Template; tp != nil {
		to := tp.Destination
		if to == "" {
			to = "a server since removed"
		}
		line("Template", "the client's network goes to %s, %d s left", to, tp.ExpiresSecs)
	}
	if d := t.Decision; d != nil {
		switch {
		case !d.Predicted:
			line("Decision", "not predicted: this scheduler cannot be previewed")
		case d.Destination == "":
			line("Decision", "no server (dry run by the %s, nothing changed)", d.By)
		default:
			line("Decision", "a new connection would go to %s (dry run by the %s on lcore %d, nothing changed)", d.Destination, d.By, s.Owner)
		}
	}
	line("Table", "%d of %d entries on lcore %d", t.Table.Entries, t.Table.Capacity, s.Owner)
	v := t.Verdict
	if v.Drop != "" {
		line("Verdict", "drop (%s): %s", v.Drop, v.Why)
	} else if v.Kernel != "" {
		line("Verdict", "to the kernel through %s, port %s's kernel interface (kni): addressed to the port itself, not to a service", v.Kernel, v.Port)
	} else if v.To != "" {
		mac := "MAC known"
		if !v.MAC {
			mac = "MAC not known"
		}
		line("Verdict", "forward to %s (%s) out of port %s, next hop %s (%s)", v.To, v.Method, v.Port, v.Via, mac)
	}
	if v.Note != "" {
		line("", "%s", v.Note)
	}
	return bw.Flush()
}
