package api

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// The dataplane ports' links: lbctl -L --links lists them, lbctl
// --ha-check (keepalived's vrrp_script) fails while one is down.

const (
	// OpLinks lists the ports' links (lbctl -L --links) in
	// Response.Links.
	OpLinks = "links"
	// OpHACheck answers the HA state and the ports' links (lbctl
	// --ha-check): lbctl exits 1 when a link is down.
	OpHACheck = "ha-check"
)

// PortLink is one dataplane port's link.
type PortLink struct {
	Port      string    `json:"port"`
	Role      string    `json:"role"` // client, server or both
	Up        bool      `json:"up"`
	SpeedMbps uint32    `json:"speed_mbps,omitempty"` // as the driver reports it
	Since     time.Time `json:"since"`                // its last change, or lbd's start
	Changes   uint64    `json:"changes"`              // downs and ups since lbd started
}

func init() {
	longOpts["--links"] = optSpec{"--links", noValue}
	allowedWith["--links"] = []string{OpLinks}
	longOpts["--ha-check"] = optSpec{"--ha-check", noValue}
	commandOps["--ha-check"] = OpHACheck
}

// LinksDown names the ports of links whose link is down.
func LinksDown(links []PortLink) []string {
	var down []string
	for _, l := range links {
		if !l.Up {
			down = append(down, l.Port)
		}
	}
	return down
}

// WriteLinks prints lbctl -L --links: a line per port.
func WriteLinks(w io.Writer, resp Response, now time.Time) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-12s %-7s %-5s %-11s %-8s %s\n", "Port", "Role", "Link", "Speed", "Changes", "Since")
	for _, l := range resp.Links {
		state, speed := "down", "-"
		if l.Up {
			state = "up"
			if l.SpeedMbps > 0 {
				speed = fmt.Sprintf("%d Mbps", l.SpeedMbps)
			}
		}
		fmt.Fprintf(&sb, "%-12s %-7s %-5s %-11s %-8d %s ago\n", l.Port, l.Role, state, speed, l.Changes, now.Sub(l.Since).Truncate(time.Second))
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// WriteHACheck prints lbctl --ha-check: the state, and the ports whose
// link is down; false when one is.
func WriteHACheck(w io.Writer, resp Response) (bool, error) {
	down := LinksDown(resp.Links)
	if len(down) == 0 {
		_, err := fmt.Fprintf(w, "%s: every port's link is up\n", resp.HAState)
		return true, err
	}
	_, err := fmt.Fprintf(w, "%s: link down on %s\n", resp.HAState, strings.Join(down, ", "))
	return false, err
}
