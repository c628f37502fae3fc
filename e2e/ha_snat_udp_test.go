package e2e

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/topo"
)

// udpSNATFlow is a real server's UDP exchange with a host beyond the
// directors, out through their SNAT rule: a datagram every 100 ms, which
// the host answers with the address and port it came from. A UDP
// mapping that did not survive a switch would not lose the exchange (the
// new master would map the next datagram afresh) but the host could see
// another port: a new peer to a stateful UDP protocol. So the flow keeps
// what the host saw, answer by answer (lbd hands out local ports in
// order, so a fresh mapping may get the old port by chance: the test
// also looks for the mapping on the backup).
type udpSNATFlow struct {
	conn net.Conn
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	seen []udpSeen
}

// udpSeen is one answer: when it came, and the source the host saw.
type udpSeen struct {
	at   time.Time
	from string
}

// startUDPSNATFlow starts the host's answering socket on hostAddr:port
// in hostNS and the server's exchange from serverNS.
func startUDPSNATFlow(t *testing.T, serverNS, hostNS, hostAddr string, port int) *udpSNATFlow {
	t.Helper()
	var pc net.PacketConn
	if err := topo.InNS(hostNS, func() (err error) {
		pc, err = net.ListenPacket("udp4", net.JoinHostPort(hostAddr, strconv.Itoa(port)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	f := &udpSNATFlow{stop: make(chan struct{})}
	if err := topo.InNS(serverNS, func() (err error) {
		f.conn, err = net.Dial("udp4", net.JoinHostPort(hostAddr, strconv.Itoa(port)))
		return err
	}); err != nil {
		pc.Close()
		t.Fatal(err)
	}
	// The host; the server's answers; the server's datagrams.
	f.wg.Go(func() { answerWithSource(pc) })
	f.wg.Go(func() {
		buf := make([]byte, 256)
		for {
			n, err := f.conn.Read(buf)
			if err != nil {
				return
			}
			from, _, _ := strings.Cut(string(buf[:n]), " ")
			f.mu.Lock()
			f.seen = append(f.seen, udpSeen{time.Now(), from})
			f.mu.Unlock()
		}
	})
	f.wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-tick.C:
				f.conn.Write([]byte("datagram"))
			}
		}
	})
	t.Cleanup(func() {
		close(f.stop)
		f.conn.Close()
		pc.Close()
		f.wg.Wait()
	})
	return f
}

// since returns the answers from t on, and the sources the host saw in
// them.
func (f *udpSNATFlow) since(t time.Time) (n int, froms []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.seen {
		if s.at.After(t) {
			n++
			if len(froms) == 0 || froms[len(froms)-1] != s.from {
				froms = append(froms, s.from)
			}
		}
	}
	return n, froms
}

// checkUDPSNAT checks that the flow's answers came back after the
// outage that began at since and lasted outage, every one of them from
// the same source the host saw at first (want).
func checkUDPSNAT(t *testing.T, f *udpSNATFlow, when string, since time.Time, outage time.Duration, want string) {
	t.Helper()
	recovered := since.Add(2*outage + 1500*time.Millisecond)
	time.Sleep(time.Until(recovered) + time.Second)
	n, froms := f.since(since)
	t.Logf("%s: the server's UDP flow through SNAT: %d answers, the host saw %v", when, n, froms)
	if m, _ := f.since(recovered); m == 0 {
		t.Errorf("%s: the server's UDP flow through SNAT got no answer since %v", when, recovered.Format("15:04:05.000"))
	}
	for _, from := range froms {
		if from != want {
			t.Errorf("%s: the host saw the server's UDP flow from %v, want %s throughout (its mapping kept)", when, froms, want)
			break
		}
	}
}
