package api

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// DaemonSpec is ipvsadm's --start-daemon / --stop-daemon.
type DaemonSpec struct {
	Mode           string `json:"mode"`                      // "master" | "backup"
	McastInterface string `json:"mcast_interface,omitempty"` // --mcast-interface; "" = the configured sync.mcast_interface
	SyncID         *int   `json:"syncid,omitempty"`          // --syncid, 0..255; nil = the configured sync.syncid
}

// Daemon is one running sync daemon (OpDaemons).
type Daemon struct {
	Mode           string   `json:"mode"`
	McastInterface string   `json:"mcast_interface,omitempty"`
	Peers          []string `json:"peers,omitempty"` // unicast peers; empty: multicast on McastInterface
	SyncID         int      `json:"syncid"`
}

// SyncPeer is a peer director whose sync master says hello (OpDaemons):
// what its newest hello said and when, and which of its local addresses
// this director took over.
type SyncPeer struct {
	Peer           string   `json:"peer"`
	State          string   `json:"state"`       // "alive", "leaving" (its lbd stopped) or "dead" (no hello for sync.peer_dead_after)
	HelloAgo       float64  `json:"hello_ago_s"` // seconds since its newest hello
	LocalAddresses []string `json:"local_addresses,omitempty"`
	TakenOver      []string `json:"taken_over,omitempty"` // of its local addresses, those this director answers for
}

// String is "peer 10.0.0.2: alive, hello 0.4s ago, local addresses
// 10.1.0.12 (taken over here: 10.1.0.12)".
func (p SyncPeer) String() string {
	s := fmt.Sprintf("peer %s: %s, hello %.1fs ago", p.Peer, p.State, p.HelloAgo)
	if len(p.LocalAddresses) > 0 {
		s += ", local addresses " + strings.Join(p.LocalAddresses, ",")
	}
	if len(p.TakenOver) > 0 {
		s += " (taken over here: " + strings.Join(p.TakenOver, ",") + ")"
	}
	return s
}

// String is ipvsadm's line, "master sync daemon (mcast=eth0, syncid=1)",
// with "peers=A,B" in place of mcast= for unicast sync.
func (d Daemon) String() string {
	where := "mcast=" + d.McastInterface
	if len(d.Peers) > 0 {
		where = "peers=" + strings.Join(d.Peers, ",")
	}
	return fmt.Sprintf("%s sync daemon (%s, syncid=%d)", d.Mode, where, d.SyncID)
}

// WriteDaemons prints lbctl -L --daemon: one line per running daemon,
// nothing when none runs (as ipvsadm), then one per peer director whose
// hellos a backup hears.
func WriteDaemons(w io.Writer, resp Response) error {
	for _, d := range resp.Daemons {
		if _, err := fmt.Fprintln(w, d.String()); err != nil {
			return err
		}
	}
	for _, p := range resp.SyncPeers {
		if _, err := fmt.Fprintln(w, p.String()); err != nil {
			return err
		}
	}
	return nil
}

// daemonArgs collects the sync daemon options while ParseArgs reads.
type daemonArgs struct {
	mode, iface, syncID string
	list                bool // -L --daemon
}

// daemonOptions are the long options of the sync daemon verbs.
var daemonOptions = map[string]optSpec{
	"--start-daemon": {"--start-daemon", needValue}, "--stop-daemon": {"--stop-daemon", needValue},
	"--mcast-interface": {"--mcast-interface", needValue}, "--syncid": {"--syncid", needValue},
	"--daemon": {"--daemon", noValue},
}

func init() {
	for k, v := range daemonOptions {
		longOpts[k] = v
	}
	commandOps["--start-daemon"] = OpStartDaemon
	commandOps["--stop-daemon"] = OpStopDaemon
	allowedWith["--mcast-interface"] = []string{OpStartDaemon}
	allowedWith["--syncid"] = []string{OpStartDaemon}
	allowedWith["--daemon"] = []string{OpDaemons}
}

// set takes one sync daemon option; false if name is not one.
func (a *daemonArgs) set(name, value string) bool {
	switch name {
	case "--start-daemon", "--stop-daemon":
		a.mode = value
	case "--mcast-interface":
		a.iface = value
	case "--syncid":
		a.syncID = value
	case "--daemon":
		a.list = true
	default:
		return false
	}
	return true
}

// finish fills c's DaemonSpec for a start or stop.
func (a *daemonArgs) finish(c *Command) error {
	if c.Op != OpStartDaemon && c.Op != OpStopDaemon {
		return nil
	}
	flag := commandName(c.Op)
	if a.mode != "master" && a.mode != "backup" {
		return fmt.Errorf("%s %q: want master or backup", flag, a.mode)
	}
	spec := &DaemonSpec{Mode: a.mode, McastInterface: a.iface}
	if a.syncID != "" {
		n, err := strconv.Atoi(a.syncID)
		if err != nil || n < 0 || n > 255 {
			return fmt.Errorf("--syncid %q: want 0..255", a.syncID)
		}
		spec.SyncID = &n
	}
	c.Daemon = spec
	return nil
}
