package harness

import (
	"io"
	"net"
	"time"

	"github.com/dplb/dplb/e2e/topo"
)

// Forward accepts connections on ln until it is closed and joins each to
// target (host:port) as seen from inside the network namespace ns: a
// browser beside the test reaches lbd's console, which listens on the LB
// namespace's loopback.
func Forward(ln net.Listener, ns, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		var up net.Conn
		err = topo.InNS(ns, func() (err error) {
			up, err = net.DialTimeout("tcp", target, 5*time.Second)
			return err
		})
		if err != nil {
			c.Close()
			continue
		}
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}
