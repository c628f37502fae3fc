package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/dplb/dplb/conf/keepalived"
)

// importKeepalivedMain is `lbd import-keepalived`: print the virtual
// servers of a keepalived.conf as lbd.yaml's services on stdout, and on
// stderr what could not be carried over; exit 0 when everything was, 1
// when something was dropped (the services still printed), 2 when the
// file cannot be read or parsed.
func importKeepalivedMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lbd import-keepalived", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("f", "/etc/keepalived/keepalived.conf", "keepalived's configuration file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lbd import-keepalived: unexpected argument %q (the file goes after -f)\n", fs.Arg(0))
		return 2
	}
	res, err := keepalived.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "lbd import-keepalived: %v\n", err)
		return 2
	}
	if _, err := stdout.Write(res.YAML(*path)); err != nil {
		fmt.Fprintf(stderr, "lbd import-keepalived: %v\n", err)
		return 2
	}
	if res.VRRP != nil {
		// Not a loss: keepalived keeps electing the master beside lbd.
		fmt.Fprintf(stderr, "%s: note: vrrp_instance: VRRP stays keepalived's job: keep keepalived for failover, its notify scripts driving lbd (deploy/keepalived, docs/deploy.md)\n", res.VRRP)
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(stderr, w)
	}
	if len(res.Warnings) > 0 {
		return 1
	}
	return 0
}
