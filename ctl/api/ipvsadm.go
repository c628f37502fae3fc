package api

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Pseudo operations of a Command that lbctl answers itself.
const (
	CmdHelp    = "help"
	CmdVersion = "version"
)

// DefaultPersistence is ipvsadm's persistence timeout for a bare -p.
const DefaultPersistence = 300

// Command is one ipvsadm-style command line, parsed: the request for lbd
// (Request.Op is an Op* constant, or CmdHelp/CmdVersion) plus the options
// that only shape lbctl's output. lbctl parses its arguments with
// ParseArgs, and lbd each line of a restore (ipvsadm -R) file.
type Command struct {
	Request
	List    ListFormat // -L's columns
	Numeric bool       // -n: numeric -S (names otherwise, as ipvsadm); -L is always numeric
	JSON    bool       // -o json
	Socket  string     // --socket; "" when not given
	// DiffFile is -S --diff's file of rules, which lbctl reads and sends
	// as Request.Text (Op is then OpDiff).
	DiffFile string
	// Options are the options given, by their short name when they have
	// one ("-t", "-w", "--stats"), in order.
	Options []string
}

// usage errors are plain errors: the caller adds the hint.

type argKind int

const (
	noValue argKind = iota
	needValue
	optValue   // -p [timeout]
	stateValue // --ha-state [master|backup]
)

type optSpec struct {
	name string // canonical: "-t" or "--stats"
	kind argKind
}

// longOpts maps ipvsadm's long options (and lbctl's own) to their specs.
var longOpts = map[string]optSpec{
	"--add-service": {"-A", noValue}, "--edit-service": {"-E", noValue}, "--delete-service": {"-D", noValue},
	"--clear": {"-C", noValue}, "--restore": {"-R", noValue}, "--save": {"-S", noValue},
	"--add-server": {"-a", noValue}, "--edit-server": {"-e", noValue}, "--delete-server": {"-d", noValue},
	"--list": {"-L", noValue}, "--zero": {"-Z", noValue}, "--set": {"--set", noValue},
	"--help": {"-h", noValue}, "--version": {"-V", noValue},
	"--tcp-service": {"-t", needValue}, "--udp-service": {"-u", needValue}, "--fwmark-service": {"-f", needValue},
	"--scheduler": {"-s", needValue}, "--persistent": {"-p", optValue}, "--netmask": {"-M", needValue},
	"--sched-flags": {"-b", needValue}, "--real-server": {"-r", needValue},
	"--gatewaying": {"-g", noValue}, "--ipip": {"-i", noValue}, "--masquerading": {"-m", noValue},
	"--fullnat": {"--fullnat", noValue}, "--synproxy": {"--synproxy", noValue}, "--no-synproxy": {"--no-synproxy", noValue},
	"--ops": {"--ops", noValue}, "--no-ops": {"--no-ops", noValue},
	"--quic": {"--quic", noValue}, "--no-quic": {"--no-quic", noValue},
	"--weight": {"-w", needValue}, "--u-threshold": {"-x", needValue}, "--l-threshold": {"-y", needValue},
	"--numeric": {"-n", noValue}, "--connection": {"-c", noValue},
	"--stats": {"--stats", noValue}, "--rate": {"--rate", noValue}, "--exact": {"--exact", noValue},
	"--thresholds": {"--thresholds", noValue}, "--persistent-conn": {"--persistent-conn", noValue},
	"--sort": {"--sort", noValue}, "--per-lcore": {"--per-lcore", noValue},
	"--client": {"--client", needValue},
	"--output": {"-o", needValue}, "--socket": {"--socket", needValue},
	"--binary":   {"--binary", needValue},
	"--ha-state": {"--ha-state", stateValue},
	// lbctl's own service option: sloppy_tcp, any TCP packet opens a
	// connection (a flow moved from another director; see docs/design.md).
	"--sloppy-tcp": {"--sloppy-tcp", noValue}, "--no-sloppy-tcp": {"--no-sloppy-tcp", noValue},
	// DPVS's local address verbs, with its letters.
	"--add-laddr": {"-P", noValue}, "--del-laddr": {"-Q", noValue}, "--get-laddr": {"-G", noValue},
	"--laddr": {"-z", needValue},
	// DPVS's client list verbs, long forms only: its letters (-U -V -B,
	// -O -Y -W) would take -V, the version.
	"--add-blklst": {"--add-blklst", noValue}, "--del-blklst": {"--del-blklst", noValue}, "--get-blklst": {"--get-blklst", noValue},
	"--add-whtlst": {"--add-whtlst", noValue}, "--del-whtlst": {"--del-whtlst", noValue}, "--get-whtlst": {"--get-whtlst", noValue},
	"--blklst-address": {"-k", needValue}, "--whtlst-address": {"-2", needValue},
}

// shortOpts are the one-letter options.
var shortOpts = map[byte]optSpec{}

func init() {
	for _, s := range longOpts {
		if len(s.name) == 2 {
			shortOpts[s.name[1]] = s
		}
	}
	shortOpts['l'] = optSpec{"-L", noValue}
}

// commandOps maps command options to operations.
var commandOps = map[string]string{
	"-A": OpAddService, "-E": OpEditService, "-D": OpDeleteService, "-C": OpClear,
	"-R": OpRestore, "-S": OpSave, "-a": OpAddServer, "-e": OpEditServer, "-d": OpDeleteServer,
	"-L": OpList, "-Z": OpZero, "--set": OpSetTimeouts, "-h": CmdHelp, "-V": CmdVersion,
	"--ha-state": OpHAState,
	"-P":         OpAddLaddr, "-Q": OpDelLaddr, "-G": OpGetLaddr,
	"--add-blklst": OpAddBlklst, "--del-blklst": OpDelBlklst, "--get-blklst": OpGetBlklst,
	"--add-whtlst": OpAddWhtlst, "--del-whtlst": OpDelWhtlst, "--get-whtlst": OpGetWhtlst,
}

// allowedWith lists, for each option that is not a command, the
// operations it may go with (ipvsadm's option/command table, simplified).
var allowedWith = map[string][]string{
	"-t": {OpAddService, OpEditService, OpDeleteService, OpAddServer, OpEditServer, OpDeleteServer, OpZero, OpList,
		OpAddLaddr, OpDelLaddr, OpGetLaddr, OpAddBlklst, OpDelBlklst, OpGetBlklst, OpAddWhtlst, OpDelWhtlst, OpGetWhtlst},
	"-z": {OpAddLaddr, OpDelLaddr},
	"-k": {OpAddBlklst, OpDelBlklst}, "-2": {OpAddWhtlst, OpDelWhtlst},
	"-s": {OpAddService, OpEditService}, "-p": {OpAddService, OpEditService},
	"-M": {OpAddService, OpEditService}, "-b": {OpAddService, OpEditService},
	"-r": {OpAddServer, OpEditServer, OpDeleteServer},
	"-g": {OpAddServer, OpEditServer}, "-w": {OpAddServer, OpEditServer},
	"-x": {OpAddServer, OpEditServer}, "-y": {OpAddServer, OpEditServer},
	"-c": {OpList}, "--stats": {OpList}, "--rate": {OpList}, "--exact": {OpList},
	"--thresholds": {OpList}, "--persistent-conn": {OpList}, "--sort": {OpList}, "--per-lcore": {OpList}, "--client": {OpConnections},
	"--binary":     {OpUpgrade},
	"--sloppy-tcp": {OpAddService, OpEditService}, "--no-sloppy-tcp": {OpAddService, OpEditService},
}

func init() {
	allowedWith["-u"] = allowedWith["-t"]
	allowedWith["-i"] = allowedWith["-g"]
	allowedWith["-m"] = allowedWith["-g"]
	allowedWith["--fullnat"] = allowedWith["-g"]
	allowedWith["--synproxy"] = allowedWith["-s"]
	allowedWith["--no-synproxy"] = allowedWith["-s"]
	allowedWith["--ops"] = allowedWith["-s"]
	allowedWith["--no-ops"] = allowedWith["-s"]
	allowedWith["--quic"] = allowedWith["-s"]
	allowedWith["--no-quic"] = allowedWith["-s"]
}

// commandName is the option a command is given with, for messages.
func commandName(op string) string {
	for k, v := range commandOps {
		if v == op {
			return k
		}
	}
	return op
}

// notOffered are ipvsadm's options for what lbd does not do, with why,
// so that a restore file that uses them is refused with a reason rather
// than as a typo.
var notOffered = map[string]string{
	"--tun-type":    "lbd tunnels in IPIP only (-i): GUE and GRE tunnels are not supported",
	"--tun-port":    "lbd tunnels in IPIP only (-i): GUE and GRE tunnels are not supported",
	"--tun-nocsum":  "lbd tunnels in IPIP only (-i): GUE and GRE tunnels are not supported",
	"--tun-csum":    "lbd tunnels in IPIP only (-i): GUE and GRE tunnels are not supported",
	"--tun-remcsum": "lbd tunnels in IPIP only (-i): GUE and GRE tunnels are not supported",
	"--pe":          "persistence engines (sip) are not supported: persistence is by client address (-p, -M)",
	"--tun-info":    "lbd tunnels in IPIP only: there is no tunnel information to list",
}

// opsShortOption reads ipvsadm's -o (--ops, as ipvsadm -S writes it) in
// a service's add or edit, where lbctl's -o (output format) is no use:
// an -o there not followed by json or text becomes --ops.
func opsShortOption(args []string) []string {
	if !slices.ContainsFunc(args, func(a string) bool {
		return a == "-A" || a == "-E" || a == "--add-service" || a == "--edit-service"
	}) {
		return args
	}
	out := slices.Clone(args)
	for i, a := range out {
		if a == "-o" && (i+1 == len(out) || out[i+1] != "json" && out[i+1] != "text") {
			out[i] = "--ops"
		}
	}
	return out
}

// ParseArgs parses ipvsadm's command line (plus lbctl's -o, --socket and
// the words "reload" and "upgrade [--binary PATH]"). Short options may be clustered (-Ln); an option's
// value may be attached (-w3, -ojson) or the next argument; long options
// take theirs after '=' or next. A usage error is returned as an error
// whose message names the argument.
func ParseArgs(args []string) (Command, error) {
	args = opsShortOption(args)
	var c Command
	var svcFlag, svcVal, rsVal string
	var fwd, weight, upper, lower, persist, netmask, flags, sched *string
	var sloppy *bool
	var synproxy, ops, quic *bool
	var setVals []string
	var daemon daemonArgs
	conn := false
	cmd := ""
	timeout := false
	setCmd := func(name string) error {
		op := commandOps[name]
		switch {
		case op == CmdHelp || op == CmdVersion:
			if cmd != CmdHelp {
				cmd = op
			}
		case cmd == CmdHelp || cmd == CmdVersion:
		case cmd == "" || cmd == op:
			cmd = op
		default:
			return fmt.Errorf("%s and %s: only one command at a time", commandName(cmd), name)
		}
		return nil
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		// apply handles one option; value is its argument if it has one.
		apply := func(spec optSpec, value string) error {
			c.Options = append(c.Options, spec.name)
			daemon.set(spec.name, value)
			if _, ok := commandOps[spec.name]; ok {
				if err := setCmd(spec.name); err != nil {
					return err
				}
				if spec.name == "--ha-state" {
					if value != "" && value != "master" && value != "backup" {
						return fmt.Errorf("--ha-state %q: want master or backup", value)
					}
					c.HAState = value
				}
				if spec.name == "--set" {
					for len(setVals) < 3 && i+1 < len(args) {
						i++
						setVals = append(setVals, args[i])
					}
					if len(setVals) < 3 {
						return fmt.Errorf("option \"--set\" needs three values: tcp tcpfin udp")
					}
				}
				return nil
			}
			v := value
			switch spec.name {
			case "-t", "-u", "-f":
				if svcFlag != "" && svcFlag != spec.name {
					return fmt.Errorf("%s and %s: one service at a time", svcFlag, spec.name)
				}
				svcFlag, svcVal = spec.name, v
			case "-s":
				sched = &v
			case "-p":
				persist = &v
			case "-M":
				netmask = &v
			case "-b":
				flags = &v
			case "--sloppy-tcp", "--no-sloppy-tcp":
				on := spec.name == "--sloppy-tcp"
				if sloppy != nil && *sloppy != on {
					return fmt.Errorf("--sloppy-tcp and --no-sloppy-tcp: one or the other")
				}
				sloppy = &on
			case "--synproxy", "--no-synproxy":
				on := spec.name == "--synproxy"
				synproxy = &on
			case "--ops", "--no-ops":
				on := spec.name == "--ops"
				ops = &on
			case "--quic", "--no-quic":
				on := spec.name == "--quic"
				quic = &on
			case "-r":
				rsVal = v
			case "-z":
				a, err := netip.ParseAddr(v)
				if err != nil || a.Zone() != "" {
					return fmt.Errorf("-z %q: not an IPv4 or IPv6 address", v)
				}
				c.LocalAddress = a.Unmap().String()
			case "-k", "-2":
				// lbd reads the entry (conf.ParseClientPrefix), and names
				// what else is wrong with it.
				_, perr := netip.ParsePrefix(v)
				if _, aerr := netip.ParseAddr(v); perr != nil && aerr != nil {
					return fmt.Errorf("%s %q: not an address or a prefix (e.g. 192.0.2.7, 198.51.100.0/24, 2001:db8::/48)", spec.name, v)
				}
				c.ClientPrefix = v
			case "-g", "-i", "-m", "--fullnat":
				f := map[string]string{"-g": "dr", "-i": "tun", "-m": "nat", "--fullnat": "fullnat"}[spec.name]
				fwd = &f
			case "-w":
				weight = &v
			case "-x":
				upper = &v
			case "-y":
				lower = &v
			case "-n":
				c.Numeric = true
			case "-c":
				conn = true
			case "--stats":
				c.List.Stats = true
			case "--rate":
				c.List.Rate = true
			case "--exact":
				c.List.Exact = true
			case "--thresholds":
				c.List.Thresholds = true
			case "--persistent-conn":
				c.List.PersistentConn = true
			case "--per-lcore":
				c.List.PerLcore = true
			case "--client":
				if _, err := netip.ParseAddr(v); err != nil {
					return fmt.Errorf("--client %q: not an IPv4 or IPv6 address", v)
				}
				c.Client = v
			case "--timeout":
				timeout = true
			case "--dry-run":
				c.DryRun = true
			case "--diff":
				if v == "" {
					return fmt.Errorf("option %q needs a file", "--diff")
				}
				c.DiffFile = v
			case "--sort":
			case "-o":
				switch v {
				case "json":
					c.JSON = true
				case "text":
					c.JSON = false
				default:
					return fmt.Errorf("unsupported output format %q (want json or text)", v)
				}
			case "--binary":
				if v == "" {
					return fmt.Errorf("option %q needs a value", "--binary")
				}
				c.Binary = v
			case "--socket":
				if v == "" {
					return fmt.Errorf("option %q needs a value", "--socket")
				}
				c.Socket = v
			}
			return nil
		}
		switch {
		case strings.HasPrefix(arg, "--") && len(arg) > 2:
			name, val, hasVal := strings.Cut(arg, "=")
			spec, ok := longOpts[name]
			if why, lacking := notOffered[name]; !ok && lacking {
				return Command{}, fmt.Errorf("%s: %s", name, why)
			}
			if !ok {
				return Command{}, fmt.Errorf("unknown option %q", name)
			}
			switch spec.kind {
			case noValue:
				if hasVal {
					return Command{}, fmt.Errorf("option %q takes no value", name)
				}
			case stateValue:
				if !hasVal && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
					i++
					val = args[i]
				}
			case needValue:
				if !hasVal {
					if i+1 >= len(args) {
						return Command{}, fmt.Errorf("option %q needs a value", name)
					}
					i++
					val = args[i]
				}
			case optValue:
				if !hasVal && i+1 < len(args) && isNumber(args[i+1]) {
					i++
					val, hasVal = args[i], true
				}
				if !hasVal {
					val = strconv.Itoa(DefaultPersistence)
				}
			}
			if err := apply(spec, val); err != nil {
				return Command{}, err
			}
		case strings.HasPrefix(arg, "-") && len(arg) > 1 && arg != "--":
			for j := 1; j < len(arg); j++ {
				spec, ok := shortOpts[arg[j]]
				if !ok {
					if j == 1 && len(arg) == 2 {
						return Command{}, fmt.Errorf("unknown option %q", arg)
					}
					return Command{}, fmt.Errorf("unknown option %q in %q", "-"+string(arg[j]), arg)
				}
				val := ""
				switch spec.kind {
				case needValue:
					if j+1 < len(arg) {
						val = arg[j+1:]
					} else if i+1 < len(args) {
						i++
						val = args[i]
					} else {
						return Command{}, fmt.Errorf("option %q needs a value", "-"+string(arg[j]))
					}
					j = len(arg)
				case optValue:
					switch {
					case j+1 < len(arg):
						val = arg[j+1:]
					case i+1 < len(args) && isNumber(args[i+1]):
						i++
						val = args[i]
					default:
						val = strconv.Itoa(DefaultPersistence)
					}
					j = len(arg)
				}
				if err := apply(spec, val); err != nil {
					return Command{}, err
				}
			}
		case arg == "trace" && cmd == "":
			// lbctl trace (trace.go) has options of its own: parse the
			// line again without the word.
			return parseTrace(append(slices.Clone(args[:i]), args[i+1:]...))
		case arg == "reload" && cmd == "":
			cmd = OpReload
		case arg == "upgrade" && cmd == "":
			cmd = OpUpgrade
		case arg == "drain" && cmd == "":
			cmd = OpDrain
		case arg == "undrain" && cmd == "":
			cmd = OpUndrain
		default:
			return Command{}, fmt.Errorf("unexpected argument %q", arg)
		}
	}
	if cmd == "" {
		cmd = OpList
	}
	if cmd == OpList && timeout {
		if conn {
			return Command{}, fmt.Errorf("-c and --timeout: list connections or timeouts, not both")
		}
		cmd = OpTimeouts
	}
	if cmd == OpSave && c.DiffFile != "" {
		cmd = OpDiff
	}
	if cmd == OpList && conn {
		cmd = OpConnections
	}
	if cmd == OpList && daemon.list {
		cmd = OpDaemons
	}
	if cmd == OpList && slices.Contains(c.Options, "--bgp") {
		cmd = OpBGP
	}
	if cmd == OpList && slices.Contains(c.Options, "--links") {
		cmd = OpLinks
	}
	c.Op = cmd
	if err := daemon.finish(&c); err != nil {
		return Command{}, err
	}
	if cmd == CmdHelp || cmd == CmdVersion {
		return c, nil
	}
	for _, o := range c.Options {
		if _, isCmd := commandOps[o]; isCmd {
			continue
		}
		ok, known := allowedWith[o]
		if known && !slices.Contains(ok, cmd) && !(cmd == OpConnections && slices.Contains(ok, OpList)) &&
			!(cmd == OpTimeouts && o == "--timeout") && !(cmd == OpDiff && o == "--diff") {
			return Command{}, fmt.Errorf("option %s is not allowed with %s", o, cmdLabel(cmd))
		}
	}
	if svcFlag == "-f" {
		return Command{}, fmt.Errorf("-f %s: firewall-mark services are not supported", svcVal)
	}
	if svcFlag != "" {
		s, err := parseService(svcFlag, svcVal)
		if err != nil {
			return Command{}, err
		}
		s.Scheduler = sched
		s.SloppyTCP = sloppy
		s.SynProxy = synproxy
		s.OnePacket = ops
		s.QUIC = quic
		if flags != nil {
			fl := []string{}
			if *flags != "" {
				fl = strings.Split(*flags, ",")
			}
			s.SchedFlags = &fl
		}
		if persist != nil {
			n, err := parseUint("-p", *persist, 0, MaxPersistence, "timeout")
			if err != nil {
				return Command{}, err
			}
			p := uint32(n)
			s.Persistence = &p
		}
		if s.Port == 0 && cmd == OpAddService && (s.Persistence == nil || *s.Persistence == 0) {
			// ipvsadm's own refusal ("Zero port specified for
			// non-persistent service"); lbd checks an edit.
			return Command{}, fmt.Errorf("%s: port 0 (every port of the VIP) needs persistence: add -p [timeout]", s)
		}
		if netmask != nil {
			// An IPv4 netmask, or a prefix length (an IPv6 service's).
			if a, err := netip.ParseAddr(*netmask); (err != nil || !a.Is4()) && !isNumber(*netmask) {
				return Command{}, fmt.Errorf("-M %s: not an IPv4 netmask (e.g. 255.255.255.0) or a prefix length (e.g. 64)", *netmask)
			}
			s.Netmask = netmask
		}
		c.Service = &s
	}
	if rsVal != "" {
		proto := "tcp"
		if svcFlag == "-u" {
			proto = "udp"
		}
		r, err := parseServer(rsVal, proto)
		if err != nil {
			return Command{}, err
		}
		r.Forward = fwd
		for _, p := range []struct {
			flag, what string
			v          *string
			max        int
			dst        **int
		}{
			{"-w", "weight", weight, 65535, &r.Weight},
			{"-x", "upper threshold", upper, MaxThreshold, &r.Upper},
			{"-y", "lower threshold", lower, MaxThreshold, &r.Lower},
		} {
			if p.v == nil {
				continue
			}
			n, err := parseUint(p.flag, *p.v, 0, p.max, p.what)
			if err != nil {
				return Command{}, err
			}
			*p.dst = &n
		}
		c.Server = &r
	}
	switch cmd {
	case OpAddService, OpEditService, OpDeleteService, OpAddServer, OpEditServer, OpDeleteServer, OpAddLaddr, OpDelLaddr,
		OpAddBlklst, OpDelBlklst, OpAddWhtlst, OpDelWhtlst:
		if c.Service == nil {
			return Command{}, fmt.Errorf("%s needs a service: -t|-u VIP:port", commandName(cmd))
		}
	}
	switch cmd {
	case OpAddServer, OpEditServer, OpDeleteServer:
		if c.Server == nil {
			return Command{}, fmt.Errorf("%s needs a real server: -r RIP[:port]", commandName(cmd))
		}
	case OpAddLaddr, OpDelLaddr:
		if c.LocalAddress == "" {
			return Command{}, fmt.Errorf("%s needs a local address: -z LIP", cmdLabel(cmd))
		}
	case OpAddBlklst, OpDelBlklst:
		if c.ClientPrefix == "" {
			return Command{}, fmt.Errorf("%s needs a client address or prefix: -k ADDR[/LEN]", cmdLabel(cmd))
		}
	case OpAddWhtlst, OpDelWhtlst:
		if c.ClientPrefix == "" {
			return Command{}, fmt.Errorf("%s needs a client address or prefix: -2 ADDR[/LEN]", cmdLabel(cmd))
		}
	}
	if cmd == OpSetTimeouts {
		var t [3]int
		for k, name := range []string{"tcp", "tcpfin", "udp"} {
			n, err := parseUint("--set", setVals[k], 0, MaxTimeout, name+" timeout")
			if err != nil {
				return Command{}, err
			}
			t[k] = n
		}
		c.Timeouts = &TimeoutsSpec{TCP: t[0], TCPFin: t[1], UDP: t[2]}
	}
	return c, nil
}

// cmdLabel names an operation by its option, or "reload".
func cmdLabel(op string) string {
	switch op {
	case OpTimeouts:
		return "-L --timeout"
	case OpDiff:
		return "-S --diff"
	case OpReload:
		return "reload"
	case OpUpgrade:
		return "upgrade"
	case OpConnections:
		return "-L -c"
	case OpDaemons:
		return "-L --daemon"
	case OpBGP:
		return "-L --bgp"
	case OpLinks:
		return "-L --links"
	case OpDrain, OpUndrain:
		return op
	case OpAddLaddr:
		return "--add-laddr"
	case OpDelLaddr:
		return "--del-laddr"
	case OpGetLaddr:
		return "--get-laddr"
	}
	return commandName(op)
}
