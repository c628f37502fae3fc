package api

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Staged changes (lbctl -R --dry-run, lbctl -S --diff FILE): the rules a
// table would gain, lose or see changed, as ipvsadm's options name them.

// Operations of staged changes; -R --dry-run is OpRestore with DryRun.
const (
	// OpTimeouts returns the connection timeouts (ipvsadm -L --timeout)
	// in Response.Timeouts.
	OpTimeouts = "timeouts"
	// OpDiff compares the running services and timeouts with Request.Text,
	// a saved rules file (lbctl -S --diff) taken as the whole table: the
	// changes restoring it onto an empty table would make come back in
	// Response.Changes. Nothing changes.
	OpDiff = "diff"
)

// The options of -L --timeout, -R --dry-run and -S --diff.
func init() {
	longOpts["--timeout"] = optSpec{"--timeout", noValue}
	longOpts["--dry-run"] = optSpec{"--dry-run", noValue}
	longOpts["--diff"] = optSpec{"--diff", needValue}
	allowedWith["--timeout"] = []string{OpList}
	allowedWith["--dry-run"] = []string{OpRestore}
	allowedWith["--diff"] = []string{OpSave}
}

// Kinds of Change.
const (
	ChangeAdd    = "add"
	ChangeRemove = "remove"
	ChangeEdit   = "change"
)

// Change is one service, real server or the timeouts, added, removed or
// changed. Rule is the rule as ipvsadm -S -n writes it (the new one for an
// add or a change, the running one for a remove); Fields, for a change,
// say what moves, and for a service added or removed, its client lists.
type Change struct {
	Kind    string        `json:"kind"`             // ChangeAdd, ChangeRemove, ChangeEdit
	Service string        `json:"service"`          // "-t VIP:port"; "" for the timeouts
	Server  string        `json:"server,omitempty"` // "RIP:port" for a real server
	Rule    string        `json:"rule"`
	Fields  []FieldChange `json:"fields,omitempty"`
}

// FieldChange is one setting that differs, named by its option.
type FieldChange struct {
	Option string `json:"option"` // "-s", "-w", "--set tcp", ...
	From   string `json:"from"`
	To     string `json:"to"`
}

// DiffRules compares two tables in ipvsadm's terms (the settings -S
// writes: scheduler, persistence, netmask, flags, local addresses, client
// lists; method, weight, thresholds) and two sets of timeouts (nil: not
// compared). Services and servers come sorted as -L sorts them; a
// removed service's servers go with it.
func DiffRules(from, to []Service, fromT, toT *TimeoutsSpec) []Change {
	var out []Change
	if fromT != nil && toT != nil {
		var fs []FieldChange
		for _, f := range []struct {
			name     string
			old, new int
		}{{"tcp", fromT.TCP, toT.TCP}, {"tcpfin", fromT.TCPFin, toT.TCPFin}, {"udp", fromT.UDP, toT.UDP}} {
			if f.old != f.new {
				fs = append(fs, FieldChange{Option: "--set " + f.name, From: strconv.Itoa(f.old), To: strconv.Itoa(f.new)})
			}
		}
		if fs != nil {
			out = append(out, Change{Kind: ChangeEdit, Rule: fmt.Sprintf("--set %d %d %d", toT.TCP, toT.TCPFin, toT.UDP), Fields: fs})
		}
	}
	a, b := sortedServices(from), sortedServices(to)
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch c := cmpServiceKeys(a, b, i, j); {
		case c < 0:
			out = append(out, serviceChanges(ChangeRemove, a[i])...)
			i++
		case c > 0:
			out = append(out, serviceChanges(ChangeAdd, b[j])...)
			j++
		default:
			out = append(out, editedService(a[i], b[j])...)
			i, j = i+1, j+1
		}
	}
	return out
}

func sortedServices(s []Service) []Service {
	s = slices.Clone(s)
	slices.SortStableFunc(s, compareServices)
	for i := range s {
		s[i].Servers = slices.Clone(s[i].Servers)
		slices.SortStableFunc(s[i].Servers, compareServers)
	}
	return s
}

// cmpServiceKeys orders a[i] and b[j], an exhausted side last.
func cmpServiceKeys(a, b []Service, i, j int) int {
	switch {
	case i == len(a):
		return 1
	case j == len(b):
		return -1
	}
	return compareServices(a[i], b[j])
}

func serviceFlag(s Service) string {
	if s.Protocol == "UDP" {
		return "-u " + addrPort(s.VIP, s.Port)
	}
	return "-t " + addrPort(s.VIP, s.Port)
}

// serviceRule and serverRule are the lines WriteSave writes. A service's
// client lists, which may hold thousands of entries, are left out: its
// change names them as fields.
func serviceRule(s Service) string {
	var b strings.Builder
	s.Servers, s.Blocklist, s.Allowlist = nil, nil, nil
	WriteSave(&b, []Service{s})
	return strings.TrimSuffix(b.String(), "\n")
}

func serverRule(s Service, r RealServer) string {
	var b strings.Builder
	s.Servers, s.Blocklist, s.Allowlist = []RealServer{r}, nil, nil
	WriteSave(&b, []Service{s})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	return lines[len(lines)-1]
}

// serviceChanges adds or removes a service, its client lists (as fields)
// and its servers.
func serviceChanges(kind string, s Service) []Change {
	name := serviceFlag(s)
	fs := clientListFields(Service{}, s)
	if kind == ChangeRemove {
		fs = clientListFields(s, Service{})
	}
	out := []Change{{Kind: kind, Service: name, Rule: serviceRule(s), Fields: fs}}
	for _, r := range s.Servers {
		out = append(out, Change{Kind: kind, Service: name, Server: addrPort(r.Address, r.Port), Rule: serverRule(s, r)})
	}
	return out
}

// editedService compares one service's settings and servers.
func editedService(a, b Service) []Change {
	name := serviceFlag(b)
	var out []Change
	var fs []FieldChange
	field := func(opt, old, new string) {
		if old != new {
			fs = append(fs, FieldChange{Option: opt, From: old, To: new})
		}
	}
	field("-s", a.Scheduler, b.Scheduler)
	field("-p", strconv.Itoa(int(a.Persistence)), strconv.Itoa(int(b.Persistence)))
	field("-M", netmaskOrHost(a.Netmask), netmaskOrHost(b.Netmask))
	field("-b", strings.Join(a.SchedFlags, ","), strings.Join(b.SchedFlags, ","))
	field("--synproxy", strconv.FormatBool(a.SynProxy), strconv.FormatBool(b.SynProxy))
	field("--ops", strconv.FormatBool(a.OnePacket), strconv.FormatBool(b.OnePacket))
	field("--quic", strconv.FormatBool(a.QUIC), strconv.FormatBool(b.QUIC))
	field("-z", strings.Join(a.LocalAddresses, ","), strings.Join(b.LocalAddresses, ","))
	fs = append(fs, clientListFields(a, b)...)
	if fs != nil {
		out = append(out, Change{Kind: ChangeEdit, Service: name, Rule: serviceRule(b), Fields: fs})
	}
	i, j := 0, 0
	for i < len(a.Servers) || j < len(b.Servers) {
		var c int
		switch {
		case i == len(a.Servers):
			c = 1
		case j == len(b.Servers):
			c = -1
		default:
			c = compareServers(a.Servers[i], b.Servers[j])
		}
		switch {
		case c < 0:
			r := a.Servers[i]
			out = append(out, Change{Kind: ChangeRemove, Service: name, Server: addrPort(r.Address, r.Port), Rule: serverRule(a, r)})
			i++
		case c > 0:
			r := b.Servers[j]
			out = append(out, Change{Kind: ChangeAdd, Service: name, Server: addrPort(r.Address, r.Port), Rule: serverRule(b, r)})
			j++
		default:
			ra, rb := a.Servers[i], b.Servers[j]
			fs = nil
			field("-g|-i|-m", forwardSwitch(ra.Forward), forwardSwitch(rb.Forward))
			field("-w", strconv.Itoa(ra.Weight), strconv.Itoa(rb.Weight))
			field("-x", strconv.Itoa(ra.Upper), strconv.Itoa(rb.Upper))
			field("-y", strconv.Itoa(ra.Lower), strconv.Itoa(rb.Lower))
			if fs != nil {
				out = append(out, Change{Kind: ChangeEdit, Service: name, Server: addrPort(rb.Address, rb.Port), Rule: serverRule(b, rb), Fields: fs})
			}
			i, j = i+1, j+1
		}
	}
	return out
}

// clientListFields are the blocklist (-k) and allowlist (-2) fields
// that differ from a to b, each list joined by commas.
func clientListFields(a, b Service) []FieldChange {
	var fs []FieldChange
	for _, f := range []struct {
		opt      string
		old, new []string
	}{{"-k", a.Blocklist, b.Blocklist}, {"-2", a.Allowlist, b.Allowlist}} {
		if old, new := strings.Join(f.old, ","), strings.Join(f.new, ","); old != new {
			fs = append(fs, FieldChange{Option: f.opt, From: old, To: new})
		}
	}
	return fs
}

func netmaskOrHost(m string) string {
	if m == "" {
		return "255.255.255.255"
	}
	return m
}

// WriteDiff prints changes one a line, as diff(1) marks them: "+ rule"
// for an addition, "- rule" for a removal, "~ rule" then the fields
// ("    -w 1 -> 3") for a change.
func WriteDiff(w io.Writer, changes []Change) error {
	bw := bufio.NewWriter(w)
	for _, c := range changes {
		mark := map[string]string{ChangeAdd: "+", ChangeRemove: "-", ChangeEdit: "~"}[c.Kind]
		fmt.Fprintf(bw, "%s %s\n", mark, c.Rule)
		for _, f := range c.Fields {
			fmt.Fprintf(bw, "    %s %s -> %s\n", f.Option, f.From, f.To)
		}
	}
	return bw.Flush()
}

// WriteTimeouts prints the timeouts as ipvsadm -L --timeout does.
func WriteTimeouts(w io.Writer, resp Response) error {
	if resp.Timeouts == nil {
		return fmt.Errorf("lbd sent no timeouts")
	}
	t := resp.Timeouts
	_, err := fmt.Fprintf(w, "Timeout (tcp tcpfin udp): %d %d %d\n", t.TCP, t.TCPFin, t.UDP)
	return err
}
