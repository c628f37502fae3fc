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
  lbctl -L|-l [-n] [--stats] [--exact] [-o json]
  lbctl -h|--help
  lbctl -V|--version

Commands:
  --list         -L|-l     list the table (the default without a command)

Options:
  --numeric      -n        numeric output of addresses and ports (always on)
  --stats                  output of statistics information
  --rate                   output of rate information (not supported yet)
  --exact                  expand numbers (display exact values)
  --output json  -o json   print lbd's response as JSON
  --socket PATH            lbd's control socket (default $DPLB_SOCKET, else ` + api.DefaultSocket + `)
  --help         -h        display this help message
  --version      -V        display the version
`

type command int

const (
	cmdList command = iota
	cmdHelp
	cmdVersion
)

// options is the parsed command line.
type options struct {
	cmd     command
	numeric bool
	stats   bool
	exact   bool
	json    bool
	socket  string
}

// usageError is a command-line mistake: exit code 2 and a hint.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// parseArgs parses ipvsadm-style arguments: short options may be clustered
// (-Ln), -o takes its value attached (-ojson) or next; long options take
// theirs after '=' or next.
func parseArgs(args []string, getenv func(string) string) (options, error) {
	o := options{cmd: cmdList, socket: api.DefaultSocket}
	if s := getenv("DPLB_SOCKET"); s != "" {
		o.socket = s
	}
	var rate bool
	setOutput := func(v string) error {
		switch v {
		case "json":
			o.json = true
		case "text":
			o.json = false
		default:
			return usagef("unsupported output format %q (want json or text)", v)
		}
		return nil
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		// value returns the argument of an option that takes one.
		value := func(name, attached string, hasAttached bool) (string, error) {
			if hasAttached {
				return attached, nil
			}
			if i+1 >= len(args) {
				return "", usagef("option %q needs a value", name)
			}
			i++
			return args[i], nil
		}
		switch {
		case strings.HasPrefix(arg, "--") && len(arg) > 2:
			name, val, hasVal := strings.Cut(arg, "=")
			switch name {
			case "--list", "--numeric", "--stats", "--rate", "--exact", "--help", "--version":
				if hasVal {
					return options{}, usagef("option %q takes no value", name)
				}
			}
			switch name {
			case "--list":
				o.cmd = cmdList
			case "--numeric":
				o.numeric = true
			case "--stats":
				o.stats = true
			case "--rate":
				rate = true
			case "--exact":
				o.exact = true
			case "--help":
				o.cmd = cmdHelp
			case "--version":
				o.cmd = cmdVersion
			case "--output":
				v, err := value(name, val, hasVal)
				if err != nil {
					return options{}, err
				}
				if err := setOutput(v); err != nil {
					return options{}, err
				}
			case "--socket":
				v, err := value(name, val, hasVal)
				if err != nil {
					return options{}, err
				}
				if v == "" {
					return options{}, usagef("option %q needs a value", name)
				}
				o.socket = v
			default:
				return options{}, usagef("unknown option %q", name)
			}
		case strings.HasPrefix(arg, "-") && len(arg) > 1 && arg != "--":
			for j := 1; j < len(arg); j++ {
				switch c := arg[j]; c {
				case 'L', 'l':
					o.cmd = cmdList
				case 'n':
					o.numeric = true
				case 'h':
					o.cmd = cmdHelp
				case 'V':
					o.cmd = cmdVersion
				case 'o':
					v, err := value("-o", arg[j+1:], j+1 < len(arg))
					if err != nil {
						return options{}, err
					}
					if err := setOutput(v); err != nil {
						return options{}, err
					}
					j = len(arg)
				default:
					if j == 1 {
						return options{}, usagef("unknown option %q", arg)
					}
					return options{}, usagef("unknown option %q in %q", "-"+string(c), arg)
				}
			}
		default:
			return options{}, usagef("unexpected argument %q", arg)
		}
	}
	if rate && o.cmd == cmdList {
		return options{}, usagef("--rate is not supported yet")
	}
	return o, nil
}

// run is lbctl minus the process: it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "lbctl: %v\nTry 'lbctl --help' for more information.\n", err)
		return exitUsage
	}
	switch o.cmd {
	case cmdHelp:
		io.WriteString(stdout, usageText)
		return exitOK
	case cmdVersion:
		fmt.Fprintf(stdout, "lbctl (dplb) API v%d\n", api.Version)
		return exitOK
	}

	resp, err := api.Call(ctx, o.socket, api.Request{Op: api.OpList})
	if err != nil {
		fmt.Fprintf(stderr, "lbctl: %v\n", err)
		return exitError
	}
	if o.json {
		b, err := json.MarshalIndent(resp, "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "lbctl: %v\n", err)
			return exitError
		}
		b = append(b, '\n')
		if _, err := stdout.Write(b); err != nil {
			fmt.Fprintf(stderr, "lbctl: %v\n", err)
			return exitError
		}
		return exitOK
	}
	if err := api.WriteList(stdout, resp, api.ListFormat{Stats: o.stats, Exact: o.exact}); err != nil {
		fmt.Fprintf(stderr, "lbctl: %v\n", err)
		return exitError
	}
	return exitOK
}
