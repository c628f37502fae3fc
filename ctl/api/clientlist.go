package api

import (
	"bufio"
	"fmt"
	"io"
)

// WriteClientLists prints --get-blklst's or --get-whtlst's answer, the
// entries of list (Blocklist or Allowlist): one line each, its service
// first.
func WriteClientLists(w io.Writer, resp Response, list string) error {
	bw := bufio.NewWriter(w)
	head := map[string]string{Blocklist: "Blocklist", Allowlist: "Allowlist"}[list]
	fmt.Fprintf(bw, "%-4s %-26s %s\n", "Prot", "VIP:Port", head)
	for _, e := range resp.ClientLists {
		if e.List == list {
			fmt.Fprintf(bw, "%-4s %-26s %s\n", e.Protocol, addrPort(e.VIP, e.Port), e.Prefix)
		}
	}
	return bw.Flush()
}
