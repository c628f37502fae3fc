package keepalived

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/dplb/dplb/conf"
)

// keepalived's bfd_instance defaults, and lbd's bounds on bfd_interval.
const (
	defaultBFDRx         = 10 * time.Millisecond
	defaultBFDTx         = 10 * time.Millisecond
	defaultBFDIdle       = time.Second
	defaultBFDMultiplier = 5
	minBFDInterval       = 10 * time.Millisecond
	maxBFDInterval       = 10 * time.Second
)

// bfdInstance is a bfd_instance block: the session a BFD_CHECK names,
// each setting's statement (nil where keepalived's default applies).
type bfdInstance struct {
	n                                      *Node
	neighbor, source, minRx, minTx, idleTx *Node
	multiplier, passive, ttl, maxHops      *Node
	vrrpOnly                               bool // vrrp without checker: the checkers never see it
}

// readBFDs reads every bfd_instance block, before the services whose
// BFD_CHECKs name them. What lbd makes of their settings is said where a
// BFD_CHECK uses them: a bfd_instance only VRRP tracks is no concern of
// lbd's.
func (c *converter) readBFDs(nodes []*Node) {
	for _, n := range nodes {
		if n.Keyword() != "bfd_instance" {
			continue
		}
		name := firstArg(n.Args())
		if name == "" {
			c.warn(n, "a bfd_instance without a name: dropped")
			continue
		}
		if b, ok := c.bfds[name]; ok {
			c.warn(n, "bfd_instance %s is already at %s: ignored, as keepalived does", name, b.n.Pos)
			continue
		}
		b := bfdInstance{n: n}
		var vrrp, checker bool
		for _, s := range n.Block {
			switch s.Keyword() {
			case "neighbor_ip", "neighbour_ip":
				b.neighbor = s
			case "source_ip":
				b.source = s
			case "min_rx":
				b.minRx = s
			case "min_tx":
				b.minTx = s
			case "idle_tx":
				b.idleTx = s
			case "multiplier":
				b.multiplier = s
			case "passive":
				b.passive = s
			case "ttl", "hoplimit":
				b.ttl = s
			case "max_hops":
				b.maxHops = s
			case "vrrp":
				vrrp = true
			case "checker":
				checker = true
			case "weight":
				// track_bfd's default weight, VRRP's.
			default:
				c.warn(s, "unknown keyword: dropped")
			}
		}
		b.vrrpOnly = vrrp && !checker
		if c.bfds == nil {
			c.bfds = map[string]bfdInstance{}
		}
		c.bfds[name] = b
	}
}

// bfdCheck converts a BFD_CHECK: a bfd check, lbd's own single-hop session
// with the server (RFC 5880, 5881), timed as the bfd_instance it names.
// keepalived acts on the session's state at once and a BFD_CHECK has
// none of the other checkers' settings (delay_loop, retry), so lbd reads
// the state often, rise 1 and fall 1; alpha, its own or inherited, is
// start_down.
func (c *converter) bfdCheck(n *Node, t target, in inherited) (conf.HealthCheck, bool) {
	h := conf.DefaultHealthCheck()
	h.Type = conf.HealthBFD
	h.Interval, h.Timeout, h.Rise, h.Fall = 200*time.Millisecond, 100*time.Millisecond, 1, 1
	var name *Node
	for _, s := range n.Block {
		switch s.Keyword() {
		case "name":
			if name != nil || len(s.Args()) != 1 {
				c.warn(s, "a BFD_CHECK names one bfd_instance (keepalived skips it): the server is left unchecked (type none)")
				return h, false
			}
			name = s
		case "alpha":
			in.alpha = s
		default:
			c.warn(s, "unknown keyword: dropped")
		}
	}
	h.StartDown = in.alpha != nil && enabled(in.alpha.Args())
	if name == nil {
		c.warn(n, "a BFD_CHECK without a name: the server is left unchecked (type none)")
		return h, false
	}
	b, ok := c.bfds[firstArg(name.Args())]
	switch {
	case !ok:
		c.warn(name, "no bfd_instance %q: the server is left unchecked (type none)", firstArg(name.Args()))
		return h, false
	case b.vrrpOnly:
		c.warn(name, "bfd_instance %s tells VRRP only (vrrp without checker), and keepalived skips the check: the server is left unchecked (type none)", firstArg(name.Args()))
		return h, false
	case b.neighbor == nil:
		c.warn(name, "bfd_instance %s has no neighbor_ip (keepalived runs no session): the server is left unchecked (type none)", firstArg(name.Args()))
		return h, false
	}
	nbr, err := netip.ParseAddr(firstArg(b.neighbor.Args()))
	if err != nil {
		c.warn(b.neighbor, "%q is not an IP address (keepalived runs no session): the servers whose BFD_CHECK names it are left unchecked (type none)", firstArg(b.neighbor.Args()))
		return h, false
	}
	if nbr.Unmap() != t.addr {
		c.warn(n, "lbd's BFD session is with the server's own address, %s, not neighbor_ip %s (bfd_instance %s): the server is left unchecked (type none)", t.addr, nbr, firstArg(name.Args()))
		return h, false
	}
	if b.source != nil {
		src, err := netip.ParseAddr(firstArg(b.source.Args()))
		switch {
		case err != nil:
			c.warn(b.source, "%q is not an IP address: dropped", firstArg(b.source.Args()))
		case src.Unmap().Is4() != t.addr.Is4():
			c.warn(b.source, "%s is not in neighbor_ip's family (keepalived disables the instance): the servers whose BFD_CHECK names it are left unchecked (type none)", src)
			return h, false
		case !src.Unmap().Is4():
			c.warn(b.source, "lbd's probes take an IPv4 source only: dropped, the kernel chooses")
		default:
			h.Source = src.Unmap().String()
		}
	}
	h.BFDInterval = c.bfdInterval(b)
	h.BFDMultiplier = defaultBFDMultiplier
	if b.multiplier != nil {
		m, err := strconv.Atoi(firstArg(b.multiplier.Args()))
		if err != nil || m < 1 || m > 255 {
			c.warn(b.multiplier, "%q is not a multiplier in 1..255: keepalived's %d", firstArg(b.multiplier.Args()), defaultBFDMultiplier)
		} else {
			h.BFDMultiplier = m
		}
	}
	if b.idleTx != nil {
		if d, ok := millis(b.idleTx); !ok || d != defaultBFDIdle {
			c.warn(b.idleTx, "lbd sends once a second until the session is up, as RFC 5880 wants: dropped")
		}
	}
	if b.passive != nil {
		c.warn(b.passive, "lbd's session is always active (it sends first): dropped")
	}
	if b.ttl != nil && firstArg(b.ttl.Args()) != "255" {
		c.warn(b.ttl, "lbd's sessions are single-hop: it sends with TTL 255 (RFC 5881): dropped")
	}
	if b.maxHops != nil && firstArg(b.maxHops.Args()) != "0" {
		c.warn(b.maxHops, "lbd's sessions are single-hop: it takes packets that arrive with TTL 255 only (RFC 5881): dropped")
	}
	return h, true
}

// bfdInterval is lbd's bfd_interval for b: the larger of min_rx and
// min_tx, as lbd asks one interval both ways, within lbd's bounds.
func (c *converter) bfdInterval(b bfdInstance) time.Duration {
	rx, tx := defaultBFDRx, defaultBFDTx
	if b.minRx != nil {
		if d, ok := millis(b.minRx); ok {
			rx = d
		} else {
			c.warn(b.minRx, "%q is not a number of milliseconds: dropped", firstArg(b.minRx.Args()))
		}
	}
	if b.minTx != nil {
		if d, ok := millis(b.minTx); ok {
			tx = d
		} else {
			c.warn(b.minTx, "%q is not a number of milliseconds: dropped", firstArg(b.minTx.Args()))
		}
	}
	// at set the larger, other the smaller (nil: keepalived's default).
	d, small, at, other := tx, rx, b.minTx, b.minRx
	if rx > tx {
		d, small, at, other = rx, tx, b.minRx, b.minTx
	}
	if at == nil {
		at = b.n
	}
	switch {
	case d < minBFDInterval:
		d = minBFDInterval
		c.warn(at, "lbd's BFD interval is at least %s: bfd_interval %s", fmtDuration(minBFDInterval), fmtDuration(d))
	case d > maxBFDInterval:
		d = maxBFDInterval
		c.warn(at, "lbd's BFD interval is at most %s: bfd_interval %s", fmtDuration(maxBFDInterval), fmtDuration(d))
	}
	switch {
	case small == d:
	case small < minBFDInterval && d == minBFDInterval:
		c.warn(other, "lbd's BFD interval is at least %s: bfd_interval %s", fmtDuration(minBFDInterval), fmtDuration(d))
	case other == nil:
		c.warn(b.n, "lbd asks one interval both ways, the larger of min_rx and min_tx (keepalived's default %s): bfd_interval %s", fmtDuration(small), fmtDuration(d))
	default:
		c.warn(other, "lbd asks one interval both ways, the larger of min_rx and min_tx: bfd_interval %s", fmtDuration(d))
	}
	return d
}

// millis reads a bfd_instance's interval: milliseconds, with up to three
// decimals (keepalived's microseconds).
func millis(s *Node) (time.Duration, bool) {
	v := firstArg(s.Args())
	whole, frac, _ := strings.Cut(v, ".")
	w, err := strconv.ParseUint(whole, 10, 32)
	if err != nil || len(frac) > 3 || strings.Trim(frac, "0123456789") != "" {
		return 0, false
	}
	d := time.Duration(w) * time.Millisecond
	if frac != "" {
		f, _ := strconv.Atoi(frac + strings.Repeat("0", 3-len(frac)))
		d += time.Duration(f) * time.Microsecond
	}
	return d, d > 0
}
