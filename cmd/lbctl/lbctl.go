package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/dplb/dplb/ctl/api"
)

// Exit codes, as ipvsadm uses them.
const (
	exitOK    = 0
	exitError = 1 // lbd refused or could not be reached
	exitUsage = 2 // bad command line
)

const usageText = `Usage:
  lbctl -A|-E -t|-u VIP:port [-s scheduler] [-p [timeout]] [-M netmask] [-b sched-flags]
  lbctl -D -t|-u VIP:port
  lbctl -C
  lbctl -R < rules
  lbctl -S [-n]
  lbctl -a|-e -t|-u VIP:port -r RIP[:port] [-g|-i|-m] [-w weight] [-x upper] [-y lower]
  lbctl -d -t|-u VIP:port -r RIP[:port]
  lbctl -L|-l [-t|-u VIP:port] [-n] [--stats|--rate|--thresholds|--persistent-conn] [--per-lcore] [--exact] [--sort] [-o json]
  lbctl -L -c [-t|-u VIP:port] [--client IP] [-o json]
  lbctl -Z [-t|-u VIP:port]
  lbctl --set tcp tcpfin udp
  lbctl --start-daemon master|backup [--mcast-interface IF] [--syncid N]
  lbctl --stop-daemon master|backup
  lbctl -L --daemon
  lbctl reload
  lbctl --ha-state [master|backup]
  lbctl -h|--help
  lbctl -V|--version

Commands:
  --add-service     -A     add a virtual service with options
  --edit-service    -E     change the options given of a virtual service
  --delete-service  -D     delete a virtual service and its real servers
  --clear           -C     delete every virtual service
  --restore         -R     apply rules from stdin (ipvsadm -S format), all or nothing
  --save            -S     print the rules (ipvsadm -S format)
  --add-server      -a     add a real server with options
  --edit-server     -e     change the options given of a real server
  --delete-server   -d     delete a real server
  --list            -L|-l  list the table (the default without a command)
  --zero            -Z     zero the counters of a service or of all
  --set tcp tcpfin udp     set the connection timeouts in seconds (0 keeps one)
  --start-daemon STATE     start the connection sync daemon, master or backup (both may run);
                           needs sync.key_file in lbd's configuration
  --stop-daemon STATE      stop the connection sync daemon, master or backup
  reload                   make lbd re-read its configuration file (as SIGHUP)
  --ha-state [STATE]       make lbd the master (answers ARP for the VIPs and floating addresses,
                           announces them) or the backup of its pair; print the state

Options:
  --tcp-service  -t VIP:port   TCP service (VIP and port may be names: lb.example.com:http,
                               resolved once, here or in -R's lbd; a name must give one IPv4 address)
  --udp-service  -u VIP:port   UDP service
  --scheduler    -s NAME       scheduler (default rr)
  --persistent   -p [TIMEOUT]  persistent service, seconds (default 300; -E -p 0 turns it off)
  --netmask      -M NETMASK    persistence granularity
  --sched-flags  -b FLAGS      scheduler flags, comma separated
  --real-server  -r RIP[:port] real server (port: the service's by default; names as for -t)
  --gatewaying   -g            direct routing
  --ipip         -i            IP-in-IP tunnel
  --masquerading -m            NAT (the default)
  --weight       -w WEIGHT     0..65535 (default 1)
  --u-threshold  -x UPPER      no new connections at this many (0: no limit)
  --l-threshold  -y LOWER      new connections again below this many
  --numeric      -n            -S: addresses and ports as numbers (without -n: host and
                               service names where known, as ipvsadm); -L is always numeric
  --connection   -c            list connections: state, time left, client, VIP, real server
  --client IP                  with -c: only the connections of this client address
  --daemon                     with -L: the running sync daemons, as ipvsadm prints them
  --mcast-interface IF         with --start-daemon: the host interface to sync over (default
                               sync.mcast_interface); both modes share one interface
  --syncid N                   with --start-daemon: the sync group id, 0..255 (default sync.syncid)
  --stats                      output of statistics information
  --rate                       output of rate information
  --thresholds                 output of thresholds information
  --persistent-conn            output of persistent connection information
  --per-lcore                  one line per worker lcore: its busy share and cycles per packet
  --sort                       sort the output (always sorted)
  --exact                      expand numbers (display exact values)
  --output json  -o json       print lbd's response as JSON
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
			return exitError
		}
		c.Text = string(b)
	}
	req := c.Request
	if req.Op == api.OpList {
		req.Service = nil // lbctl filters the listing itself
	}
	resp, err := api.Call(ctx, c.Socket, req)
	if err != nil {
		fmt.Fprintf(stderr, "lbctl: %v\n", err)
		return exitError
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
			return exitError
		}
		return exitOK
	}
	switch c.Op {
	case api.OpList:
		err = api.WriteList(stdout, resp, c.List)
	case api.OpConnections:
		err = api.WriteConns(stdout, resp)
	case api.OpDaemons:
		err = api.WriteDaemons(stdout, resp)
	case api.OpSave:
		text := resp.Text
		if !c.Numeric {
			// As ipvsadm -S without -n: host and service names where known.
			text = api.NameRules(text, api.SystemNamer("/etc/services"))
		}
		_, err = io.WriteString(stdout, text)
	case api.OpHAState:
		_, err = fmt.Fprintln(stdout, resp.HAState)
	case api.OpReload:
		if len(resp.Restart) > 0 {
			fmt.Fprintf(stderr, "lbctl: reloaded; these settings differ from the running ones and need a restart of lbd: %s\n",
				strings.Join(resp.Restart, ", "))
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "lbctl: %v\n", err)
		return exitError
	}
	return exitOK
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
