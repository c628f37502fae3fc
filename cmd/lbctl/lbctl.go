package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/dplb/dplb/ctl/api"
)

// Exit codes, as ipvsadm uses them.
const (
	exitOK    = 0
	exitError = 1 // lbd refused or could not be reached
	exitUsage = 2 // bad command line
)

const usageText = `Usage:
  lbctl -A|-E -t|-u VIP:port [-s scheduler] [-p [timeout]] [-M netmask] [-b sched-flags] [--[no-]sloppy-tcp] [--[no-]ops]
  lbctl -D -t|-u VIP:port
  lbctl -C
  lbctl -R [--dry-run] < rules
  lbctl -S [-n]
  lbctl -S --diff FILE
  lbctl -a|-e -t|-u VIP:port -r RIP[:port] [-g|-i|-m] [-w weight] [-x upper] [-y lower]
  lbctl -d -t|-u VIP:port -r RIP[:port]
  lbctl --add-laddr|--del-laddr -t|-u VIP:port -z LIP
  lbctl --get-laddr [-t|-u VIP:port] [-o json]
  lbctl --add-blklst|--del-blklst -t|-u VIP:port -k ADDR[/LEN]
  lbctl --get-blklst [-t|-u VIP:port] [-o json]
  lbctl --add-whtlst|--del-whtlst -t|-u VIP:port -2 ADDR[/LEN]
  lbctl --get-whtlst [-t|-u VIP:port] [-o json]
  lbctl -L|-l [-t|-u VIP:port] [-n] [--stats|--rate|--thresholds|--persistent-conn] [--per-lcore] [--exact] [--sort] [-o json]
  lbctl -L -c [-t|-u VIP:port] [--client IP] [-o json]
  lbctl -L --timeout [-o json]
  lbctl trace -t|-u VIP:port --client IP:port [--reply RIP:port] [-o json]
  lbctl -Z [-t|-u VIP:port]
  lbctl --set tcp tcpfin udp
  lbctl --start-daemon master|backup [--mcast-interface IF] [--syncid N]
  lbctl --stop-daemon master|backup
  lbctl -L --daemon
  lbctl drain | undrain
  lbctl -L --bgp [-o json]
  lbctl -L --links [-o json]
  lbctl reload
  lbctl upgrade [--binary PATH]
  lbctl --ha-state [master|backup]
  lbctl --ha-check
  lbctl -h|--help
  lbctl -V|--version

Commands:
  --add-service     -A     add a virtual service with options
  --edit-service    -E     change the options given of a virtual service
  --delete-service  -D     delete a virtual service and its real servers (its connections
                           go on, its VIP answered while they last)
  --clear           -C     delete every virtual service
  --restore         -R     apply rules from stdin (ipvsadm -S format), all or nothing
  --save            -S     print the rules (ipvsadm -S format)
  --add-server      -a     add a real server with options
  --edit-server     -e     change the options given of a real server
  --delete-server   -d     delete a real server
  --list            -L|-l  list the table (the default without a command)
  --add-laddr       -P     add a FullNAT local address to a service (checked as local_addresses
                           in lbd.yaml: on a server-facing port's subnet, in no other pool)
  --del-laddr       -Q     remove a local address: new connections stop using it, those that
                           use it drain (lbd answers ARP for it until none is left)
  --get-laddr       -G     list the services' local addresses, draining ones marked
  --add-blklst             block a client address or prefix from a service (new connections
                           only: open ones go on; a client in both lists is blocked)
  --del-blklst             remove a blocklist entry (however written: 192.0.2.7/32 is 192.0.2.7)
  --get-blklst             list the services' blocklists
  --add-whtlst             allow a client address or prefix: a service with an allowlist takes
                           new connections from its clients only
  --del-whtlst             remove an allowlist entry (an empty allowlist lets every client in)
  --get-whtlst             list the services' allowlists
  --zero            -Z     zero the counters of a service or of all
  trace                    what lbd would do now with the next packet of one flow, and
                           why: the lcore that owns it (the steering hash of the client's
                           address:port, the NIC's RSS mode), the service and its servers,
                           the connection entry (state, time left), or the server a new
                           connection would get (a dry run of the owner's scheduler: its
                           state is not changed), the route, and the drop reason if any.
                           With no entry the packet traced is a SYN. Changes nothing.
  --set tcp tcpfin udp     set the connection timeouts in seconds (0 keeps one)
  --start-daemon STATE     start the connection sync daemon, master or backup (both may run);
                           needs sync.key_file in lbd's configuration
  --stop-daemon STATE      stop the connection sync daemon, master or backup
  reload                   make lbd re-read its configuration file (as SIGHUP)
  upgrade                  hand lbd's ports, connections and counters over to a new lbd
                           binary that runs in its place, same pid (as SIGUSR2); the binary
                           must pass 'lbd -check' first, else lbd refuses and keeps running.
                           Established connections survive; packets wait out DPDK's start-up
  --ha-state [STATE]       make lbd the master (answers ARP for the VIPs and floating addresses,
                           announces them) or the backup of its pair; print the state
  --ha-check               print the state and whether every dataplane port's link is up;
                           exit 1 while one is down (keepalived's vrrp_script: the master
                           gives its role up)
  drain                    withdraw every VIP from lbd's BGP peers and keep them withdrawn: the
                           routers send new flows to the other directors, connections here go on
  undrain                  announce the healthy VIPs again

Options:
  --tcp-service  -t VIP:port   TCP service (VIP and port may be names: lb.example.com:http,
                               resolved once, here or in -R's lbd; a name must give one IPv4 address;
                               an IPv6 VIP in brackets: [2001:db8::10]:80, a server [fd00::11]:8080);
                               port 0 with -p: every port of the VIP without a service of its own
  --udp-service  -u VIP:port   UDP service
  --scheduler    -s NAME       scheduler (default rr)
  --persistent   -p [TIMEOUT]  persistent service, seconds (default 300; -E -p 0 turns it off)
  --netmask      -M NETMASK    persistence granularity: an IPv4 netmask, or a prefix length
                               (an IPv6 service's, e.g. -M 64)
  --sched-flags  -b FLAGS      scheduler flags, comma separated
  --sloppy-tcp                 with -A/-E: any TCP packet opens a connection, not only a SYN
                               (sloppy_tcp: a director picks up a flow another one began; with
                               mh, sh or dh every director picks the same server); -E
                               --no-sloppy-tcp turns it off. -S does not save it
  --synproxy, --no-synproxy    answer SYNs with SYN cookies (nat and fullnat servers), or not
  --ops, --no-ops              one-packet scheduling: every datagram of a udp service scheduled on
                               its own, no connection kept (dr and tun servers); ipvsadm's -o
                               with -A/-E when json or text does not follow
  --quic, --no-quic            a udp service's new flows go to the server their QUIC connection ID
                               names (DPVS's encoding), so QUIC connections survive a client's move
  --real-server  -r RIP[:port] real server (port: the service's by default; names as for -t)
  --gatewaying   -g            direct routing
  --ipip         -i            IP-in-IP tunnel
  --masquerading -m            NAT (the default)
  --fullnat                    FullNAT: from the service's local addresses (lbd.yaml, --add-laddr)
  --laddr        -z LIP        with --add-laddr, --del-laddr: the local address (an IPv6 one
                               for an IPv6 service's IPv6 fullnat servers)
  --blklst-address -k ENTRY    with --add-blklst, --del-blklst: a client address or prefix in
                               the VIP's family (192.0.2.7, 198.51.100.0/24, 2001:db8:1::/64)
  --whtlst-address -2 ENTRY    with --add-whtlst, --del-whtlst: the same
  --weight       -w WEIGHT     0..65535 (default 1)
  --u-threshold  -x UPPER      no new connections at this many (0: no limit)
  --l-threshold  -y LOWER      new connections again below this many
  --numeric      -n            -S: addresses and ports as numbers (without -n: host and
                               service names where known, as ipvsadm); -L is always numeric
  --connection   -c            list connections: state, time left, client, VIP, real server
  --client IP                  with -c: only the connections of this client address
  --daemon                     with -L: the running sync daemons, as ipvsadm prints them, then
                               the peers that say hello (alive, leaving or dead, their local
                               addresses, those taken over here)
  --bgp                        with -L: the BGP sessions (state, time up, prefixes sent) and
                               the VIPs announced and withheld (scale-out, bgp: section)
  --links                      with -L: the dataplane ports' links (up or down, speed, changes)
  --mcast-interface IF         with --start-daemon: the host interface to sync over (default
                               sync.mcast_interface); both modes share one interface
  --syncid N                   with --start-daemon: the sync group id, 0..255 (default sync.syncid)
  --stats                      output of statistics information
  --rate                       output of rate information
  --thresholds                 output of thresholds information
  --persistent-conn            output of persistent connection information
  --per-lcore                  one line per worker lcore: its busy share and cycles per packet
  --sort                       sort the output (always sorted)
  --client IP:port             with trace: the client's end of the flow
  --reply RIP:port             with trace: trace the real server's reply (to the client, or to
                               the local address of a fullnat or NAT64 connection)
  --timeout                    with -L: the timeouts --set sets, as ipvsadm prints them
  --dry-run                    with -R: check the rules against the running table as -R
                               would, print what they would change, change nothing
  --diff FILE                  with -S: compare the running table with FILE, a saved table
                               (as if restored after -C; "-": stdin), and print the changes
                               (-R --dry-run and -S --diff print "+ rule" added, "- rule"
                               removed, "~ rule" changed with one "option old -> new" line
                               per setting; exit 0: no change, 1: changes, 2: error)
  --exact                      expand numbers (display exact values)
  --output json  -o json       print lbd's response as JSON
  --binary PATH                with upgrade: the new lbd binary (default: the file lbd was
                               started from, where a package puts its new version)
  --socket PATH                lbd's control socket (default $DPLB_SOCKET, else ` + api.DefaultSocket + `)
  --help         -h            display this help message
  --version      -V            display the version
`

// parseArgs parses the command line; the socket comes from --socket,
// else $DPLB_SOCKET, else the default.
func parseArgs(args []string, getenv func(string) string) (api.Command, error) {
	c, err := api.ParseArgs(args)
	if err != nil {
		return api.Command{}, err
	}
	if c.Socket == "" {
		c.Socket = api.DefaultSocket
		if s := getenv("DPLB_SOCKET"); s != "" {
			c.Socket = s
		}
	}
	return c, nil
}

// run is lbctl minus the process: it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, err := parseArgs(args, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "lbctl: %v\nTry 'lbctl --help' for more information.\n", err)
		return exitUsage
	}
	switch c.Op {
	case api.CmdHelp:
		io.WriteString(stdout, usageText)
		return exitOK
	case api.CmdVersion:
		fmt.Fprintf(stdout, "lbctl (dplb) API v%d\n", api.Version)
		return exitOK
	case api.OpRestore:
		b, err := io.ReadAll(io.LimitReader(stdin, api.MaxRequestBytes/2))
		if err != nil {
			fmt.Fprintf(stderr, "lbctl: reading rules from stdin: %v\n", err)
			return failed(c)
		}
		c.Text = string(b)
	case api.OpDiff:
		b, err := readRules(c.DiffFile, stdin)
		if err != nil {
			fmt.Fprintf(stderr, "lbctl: -S --diff: %v\n", err)
			return exitDiffError
		}
		c.Text = string(b)
	}
	if c.Op == api.OpUpgrade {
		return upgrade(ctx, c, stdout, stderr)
	}
	req := c.Request
	if req.Op == api.OpList {
		req.Service = nil // lbctl filters the listing itself
	}
	resp, err := api.Call(ctx, c.Socket, req)
	if err != nil {
		fmt.Fprintf(stderr, "lbctl: %v\n", err)
		return failed(c)
	}
	if c.Op == api.OpList && c.Service != nil {
		resp.Services = only(resp.Services, *c.Service)
	}
	if c.JSON {
		b, err := json.MarshalIndent(resp, "", "  ")
		if err == nil {
			_, err = stdout.Write(append(b, '\n'))
		}
		if err != nil {
			fmt.Fprintf(stderr, "lbctl: %v\n", err)
			return failed(c)
		}
		if c.Op == api.OpHACheck && len(api.LinksDown(resp.Links)) > 0 {
			return exitError
		}
		return diffExit(c, resp)
	}
	switch c.Op {
	case api.OpTimeouts:
		err = api.WriteTimeouts(stdout, resp)
	case api.OpTrace:
		err = api.WriteTrace(stdout, resp.Trace)
	case api.OpDiff, api.OpRestore:
		err = api.WriteDiff(stdout, resp.Changes)
	case api.OpList:
		err = api.WriteList(stdout, resp, c.List)
	case api.OpConnections:
		err = api.WriteConns(stdout, resp)
	case api.OpDaemons:
		err = api.WriteDaemons(stdout, resp)
	case api.OpBGP, api.OpDrain, api.OpUndrain:
		err = api.WriteBGP(stdout, resp, time.Now())
	case api.OpSave:
		text := resp.Text
		if !c.Numeric {
			// As ipvsadm -S without -n: host and service names where known.
			text = api.NameRules(text, api.SystemNamer("/etc/services"))
		}
		_, err = io.WriteString(stdout, text)
	case api.OpHAState:
		_, err = fmt.Fprintln(stdout, resp.HAState)
	case api.OpLinks:
		err = api.WriteLinks(stdout, resp, time.Now())
	case api.OpHACheck:
		var up bool
		if up, err = api.WriteHACheck(stdout, resp); err == nil && !up {
			return exitError // a port is down: keepalived gives the master role up
		}
	case api.OpGetLaddr:
		err = api.WriteLocalAddresses(stdout, resp)
	case api.OpGetBlklst:
		err = api.WriteClientLists(stdout, resp, api.Blocklist)
	case api.OpGetWhtlst:
		err = api.WriteClientLists(stdout, resp, api.Allowlist)
	case api.OpReload:
		if len(resp.Restart) > 0 {
			fmt.Fprintf(stderr, "lbctl: reloaded; these settings differ from the running ones and need a restart of lbd: %s\n",
				strings.Join(resp.Restart, ", "))
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "lbctl: %v\n", err)
		return failed(c)
	}
	return diffExit(c, resp)
}

// only keeps the service spec names (lbctl -L -t VIP:port).
func only(svcs []api.Service, spec api.ServiceSpec) []api.Service {
	var out []api.Service
	for _, s := range svcs {
		if strings.EqualFold(s.Protocol, spec.Protocol) && s.VIP == spec.VIP && int(s.Port) == spec.Port {
			out = append(out, s)
		}
	}
	return out
}

// Exit codes of the staged-change commands (-R --dry-run, -S --diff), as
// diff(1) has them.
const (
	exitSame      = 0 // the rules change nothing
	exitDiffers   = 1 // they change something
	exitDiffError = 2 // refused, unreadable, or lbd unreachable
)

// staged tells the commands that print changes instead of making them.
func staged(c api.Command) bool {
	return c.Op == api.OpDiff || c.Op == api.OpRestore && c.DryRun
}

// failed is the exit code of a command that could not be done.
func failed(c api.Command) int {
	if staged(c) {
		return exitDiffError
	}
	return exitError
}

// diffExit is the exit code of a command that was done.
func diffExit(c api.Command, resp api.Response) int {
	if staged(c) && len(resp.Changes) > 0 {
		return exitDiffers
	}
	return exitSame
}

// readRules reads -S --diff's file, "-" for stdin.
func readRules(path string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, api.MaxRequestBytes/2+1))
	if err == nil && len(b) > api.MaxRequestBytes/2 {
		err = fmt.Errorf("%s: more than %d bytes of rules", path, api.MaxRequestBytes/2)
	}
	return b, err
}
