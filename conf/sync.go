package conf

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"time"
)

// Sync configures connection synchronisation between directors, IPVS's
// sync daemon: a master sends its workers' connection state to the peers,
// a backup installs what it receives, over UDP on a host interface (not a
// dataplane port). Messages are authenticated with HMAC-SHA256 under the
// shared key in key_file, which every director of the pair holds; without
// it sync does not start. lbctl --start-daemon / --stop-daemon change the
// running modes without a restart.
type Sync struct {
	Master         bool          `mapstructure:"master"`          // run the master sync daemon from the start (ipvsadm --start-daemon master); default false; reload: restart
	Backup         bool          `mapstructure:"backup"`          // run the backup sync daemon from the start; both may run; default false; reload: restart
	McastInterface string        `mapstructure:"mcast_interface"` // host interface (e.g. a management NIC) to join mcast_group on and send from, required for multicast sync; with peers, the socket is bound to it; default ""; reload: restart
	McastGroup     string        `mapstructure:"mcast_group"`     // IPv4 multicast group (IPVS's); default "224.0.0.81"; reload: restart
	Peers          []string      `mapstructure:"peers"`           // IPv4 addresses of the other directors: unicast to each instead of multicast, unique; default none (multicast); reload: restart
	Listen         string        `mapstructure:"listen"`          // local IPv4 address to receive on with peers, "" = any; default ""; reload: restart
	Port           int           `mapstructure:"port"`            // UDP port, the same on every director, 1..65535; default 8848 (IPVS's); reload: restart
	SyncID         int           `mapstructure:"syncid"`          // sync group id, 0..255: a backup installs only its group's messages (ipvsadm --syncid); default 0; reload: restart
	KeyFile        string        `mapstructure:"key_file"`        // absolute path of the shared HMAC key (at least 16 bytes, a trailing newline ignored; no access for other users, e.g. mode 0600), required to run sync; default ""; reload: restart
	Threshold      int           `mapstructure:"threshold"`       // a connection is synced when it has seen this many packets (IPVS's sync_threshold), 0..1000000 and < period when period > 0; default 3; reload: restart
	Period         int           `mapstructure:"period"`          // ... and again every period packets after, 0 = once (IPVS's sync_period), 0..1000000; default 50; reload: restart
	RefreshPeriod  time.Duration `mapstructure:"refresh_period"`  // a connection is synced again when this long passed since it was (IPVS's sync_refresh_period), 0 = never by time, 0..720h; default 0; reload: restart
	PeerDeadAfter  time.Duration `mapstructure:"peer_dead_after"` // a peer whose master sent no hello this long is dead: a backup takes its FullNAT local addresses over (scale-out), 0 = never, else 2s..1h; default 3s; reload: restart
}

// DefaultSync is IPVS's sync settings, no mode running.
func DefaultSync() Sync {
	return Sync{McastGroup: "224.0.0.81", Port: 8848, Threshold: 3, Period: 50, PeerDeadAfter: 3 * time.Second}
}

// ifNameRE is a Linux interface name.
var ifNameRE = regexp.MustCompile(`^[^/\s:]{1,15}$`)

func (s Sync) validate() error {
	running := s.Master || s.Backup
	if s.McastInterface != "" && !ifNameRE.MatchString(s.McastInterface) {
		return fieldErrorf("sync.mcast_interface", "%q is not an interface name", s.McastInterface)
	}
	if g, err := netip.ParseAddr(s.McastGroup); err != nil || !g.Is4() || !g.IsMulticast() {
		return fieldErrorf("sync.mcast_group", "%q is not an IPv4 multicast address (224.0.0.0/4)", s.McastGroup)
	}
	seen := map[netip.Addr]bool{}
	for i, p := range s.Peers {
		field := fmt.Sprintf("sync.peers[%d]", i)
		a, err := netip.ParseAddr(p)
		switch {
		case err != nil || !a.Is4():
			return fieldErrorf(field, "%q is not an IPv4 address", p)
		case a.IsMulticast() || a.IsUnspecified() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			return fieldErrorf(field, "%s is not a unicast address (for multicast, set mcast_group and leave peers empty)", p)
		case seen[a]:
			return fieldErrorf(field, "%s is listed twice", p)
		}
		seen[a] = true
	}
	if s.Listen != "" {
		if a, err := netip.ParseAddr(s.Listen); err != nil || !a.Is4() || a.IsMulticast() {
			return fieldErrorf("sync.listen", "%q is not a unicast IPv4 address", s.Listen)
		}
	}
	if err := checkRange("sync.port", s.Port, 1, 65535); err != nil {
		return err
	}
	if err := checkRange("sync.syncid", s.SyncID, 0, 255); err != nil {
		return err
	}
	if err := checkRange("sync.threshold", s.Threshold, 0, 1000000); err != nil {
		return err
	}
	if err := checkRange("sync.period", s.Period, 0, 1000000); err != nil {
		return err
	}
	if s.Period > 0 && s.Threshold >= s.Period {
		return fieldErrorf("sync.threshold", "%d must be below sync.period %d (or set period 0)", s.Threshold, s.Period)
	}
	if s.RefreshPeriod < 0 || s.RefreshPeriod > maxTimeout {
		return fieldErrorf("sync.refresh_period", "%v is out of range 0..720h", s.RefreshPeriod)
	}
	if s.PeerDeadAfter != 0 && (s.PeerDeadAfter < 2*time.Second || s.PeerDeadAfter > time.Hour) {
		// A master says hello every second: under two, one lost hello
		// would kill a live peer.
		return fieldErrorf("sync.peer_dead_after", "%v is out of range: 0 (never take over) or 2s..1h (hellos come every second)", s.PeerDeadAfter)
	}
	if s.KeyFile != "" && !filepath.IsAbs(s.KeyFile) {
		return fieldErrorf("sync.key_file", "%q is not an absolute path", s.KeyFile)
	}
	if running && s.KeyFile == "" {
		return fieldErrorf("sync.key_file", "required when sync.master or sync.backup is set: sync messages are authenticated with a shared key")
	}
	if running && len(s.Peers) == 0 && s.McastInterface == "" {
		return fieldErrorf("sync.mcast_interface", "required for multicast sync (or list sync.peers for unicast)")
	}
	return nil
}
