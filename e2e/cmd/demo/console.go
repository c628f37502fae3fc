package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// consoleAddr is where lbd serves its console, inside the LB namespace,
// and where -console forwards it from on this host.
const consoleAddr = "127.0.0.1:9443"

// consoleConfig is lbd's web section for the demo: the two demo logins,
// the self-signed certificate kept in dir.
func consoleConfig(dir string) (string, error) {
	hash := func(pw string) (string, error) {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
		return string(h), err
	}
	admin, err := hash("demo")
	if err != nil {
		return "", err
	}
	viewer, err := hash("viewer")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("  listen: %s\n  tls_dir: %s\n  users:\n    - {name: demo, role: admin, password_hash: %q}\n    - {name: viewer, role: viewer, password_hash: %q}\n",
		consoleAddr, filepath.Join(dir, "web"), admin, viewer), nil
}

// serveConsole forwards consoleAddr on this host to the console for d
// (or until Ctrl-C) while the client sends a request a second.
func serveConsole(ctx context.Context, tp *topo.Topo, lbNS, clientNS, nshelper, url string, d time.Duration) error {
	ln, err := net.Listen("tcp", consoleAddr)
	if err != nil {
		return fmt.Errorf("forwarding the console: %w", err)
	}
	defer ln.Close()
	go harness.Forward(ln, lbNS, consoleAddr)
	fmt.Printf("== console forwarded: open https://%s/ in a browser on this host; lbd keeps running for %s (Ctrl-C stops)\n", consoleAddr, d)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			harness.Get(ctx, tp, clientNS, nshelper, url, 1, 2*time.Second)
		}
	}
}
