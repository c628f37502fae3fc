package api

import (
	"bufio"
	"fmt"
	"io"
)

// WriteLocalAddresses prints --get-laddr's answer: one line per local
// address, its service first; a removed one that still drains is marked.
func WriteLocalAddresses(w io.Writer, resp Response) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%-4s %-26s %s\n", "Prot", "VIP:Port", "LocalAddress")
	for _, l := range resp.LocalAddresses {
		fmt.Fprintf(bw, "%-4s %-26s %s", l.Protocol, addrPort(l.VIP, l.Port), l.Address)
		if l.Draining {
			bw.WriteString(" (draining)")
		}
		bw.WriteString("\n")
	}
	return bw.Flush()
}
