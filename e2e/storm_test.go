package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// TestUpdateStorm is issue #5's update storm: while clients keep opening
// new connections through the busy service (TCP VIP:80), thousands of
// updates go through lbd's control socket (the API lbctl speaks): other
// services added, edited and deleted, extra real servers added, edited
// and deleted on the busy service, weights and the busy service's
// scheduler changed. The busy service always keeps rs1:8080 with a
// weight of at least 1; every extra server points at a port on which a
// real server listens (rs1 and rs2 listen on :8080, :8081 and :8082).
//
// The rule for client requests, strict:
//   - a request whose TCP connection was established (nshelper get saw
//     the connection, or the long-lived client's dial returned) must
//     complete with a 200 from a real server: an established connection
//     is never broken, whatever happens to its server;
//   - a request whose connection was never established (the dial failed,
//     e.g. its SYNs were lost) may be retried once, and the retry must
//     succeed. Such retries are counted and logged; none is expected.
//
// No update may be lost: the rules lbctl -S prints at the end must equal
// the ones the sequence of updates gives. Finally lbd must exit cleanly.
func TestUpdateStorm(t *testing.T) {
	e := startNATWith(t, natOptions{listen: map[string]string{"rs1": ":8080,:8081,:8082", "rs2": ":8080,:8081,:8082"}})
	e.warmUp(t)
	vip := e.nat.VIP.String()
	rs1, rs2 := e.nat.Servers[0].Addr.Addr().String(), e.nat.Servers[1].Addr.Addr().String()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer halt() // also when the storm fails: no client may outlive the test
	var mu sync.Mutex
	var stats struct{ requests, retries, long int }
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
	}

	// Short requests: nshelper get in batches. One client: on a 2-CPU
	// machine lbd's worker spins on one CPU and everything else shares
	// the other.
	for c := range 1 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := harness.Get(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, e.url, 25, 5*time.Second)
				if err != nil && len(res) == 0 {
					fail("client %d: %v", c, err)
					return
				}
				for _, r := range res {
					mu.Lock()
					stats.requests++
					mu.Unlock()
					if r.Err == "" && strings.HasPrefix(r.Body, "rs") {
						continue
					}
					if r.Local != "" {
						fail("client %d: request on established connection %s -> %s broken: %q %s", c, r.Local, r.Remote, r.Body, r.Err)
						continue
					}
					mu.Lock()
					stats.retries++
					mu.Unlock()
					retry, err := harness.Get(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, e.url, 1, 5*time.Second)
					if err != nil {
						fail("client %d: retry of a request that never connected (%s): %v", c, r.Err, err)
						continue
					}
					t.Logf("client %d: request never connected (%s); retried: %q %s", c, r.Err, retry[0].Body, retry[0].Err)
					if retry[0].Err != "" || !strings.HasPrefix(retry[0].Body, "rs") {
						fail("client %d: retry of a request that never connected failed too: %q %s", c, retry[0].Body, retry[0].Err)
					}
				}
			}
		})
	}
	// Long-lived connections: each sends its request header slowly over
	// ~4 s, across hundreds of updates, then must get its answer.
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			err := slowRequest(e.ctx, e.nat.Client.NS, vip+":80", 4*time.Second)
			var dial *dialError
			if errors.As(err, &dial) {
				t.Logf("long-lived client: %v; retrying once", err)
				mu.Lock()
				stats.retries++
				mu.Unlock()
				err = slowRequest(e.ctx, e.nat.Client.NS, vip+":80", 4*time.Second)
			}
			if err != nil {
				fail("long-lived client: %v", err)
				return
			}
			mu.Lock()
			stats.long++
			mu.Unlock()
		}
	})

	// The storm.
	const updates = 1500
	const pace = 10 * time.Millisecond // at least this long per update, so that traffic overlaps 10 s of them or more
	m := newStormModel(vip, rs1, rs2)
	seed := uint64(time.Now().UnixNano())
	t.Logf("storm seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	start := time.Now()
	applied, refused := 0, 0
	total, count := map[string]time.Duration{}, map[string]int{}
	var slowest time.Duration
	var slowestOp string
	for i := 0; applied < updates; i++ {
		next := start.Add(time.Duration(i) * pace)
		time.Sleep(time.Until(next))
		req, wantErr := m.next(rng, i)
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		t0 := time.Now()
		_, err := api.Call(ctx, e.cfg.Socket, req)
		cancel()
		took := time.Since(t0)
		total[req.Op] += took
		count[req.Op]++
		if took > slowest {
			slowest, slowestOp = took, fmt.Sprintf("%s %s %s", req.Op, specString(req.Service), serverString(req.Server))
		}
		var re *api.RemoteError
		switch {
		case wantErr && errors.As(err, &re):
			refused++
		case wantErr:
			t.Fatalf("update %d (%s %+v %+v) should have been refused, got %v", i, req.Op, req.Service, req.Server, err)
		case err != nil:
			t.Fatalf("update %d (%s %s %s) refused: %v", i, req.Op, specString(req.Service), serverString(req.Server), err)
		default:
			m.commit()
			applied++
		}
		if t.Failed() {
			break
		}
	}
	took := time.Since(start)
	halt()
	t.Logf("%d updates applied and %d refused as they should in %v; %d short requests, %d long-lived ones, %d retries",
		applied, refused, took.Round(time.Millisecond), stats.requests, stats.long, stats.retries)
	var per []string
	for op, d := range total {
		per = append(per, fmt.Sprintf("%s %d×%v", op, count[op], (d/time.Duration(count[op])).Round(time.Microsecond)))
	}
	slices.Sort(per)
	t.Logf("mean time per update: %s; slowest %v (%s)", strings.Join(per, ", "), slowest.Round(time.Microsecond), slowestOp)
	if stats.requests < 1000 || stats.long < 2 {
		t.Errorf("too little traffic during the storm: %d requests, %d long-lived", stats.requests, stats.long)
	}

	// No update lost.
	got, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-S", "-n")
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	api.WriteSave(&want, m.services())
	if got != want.String() {
		t.Errorf("lbctl -S after the storm:\n%s\nwant (from the updates):\n%s", got, want.String())
	}
	// The busy service still serves.
	for _, r := range e.get(t, e.url, 10, 5*time.Second) {
		if r.Err != "" {
			t.Errorf("after the storm: request %d failed: %s", r.I, r.Err)
		}
	}
	e.stopLBD(t)
}

// dialError is a connection that was never established.
type dialError struct{ err error }

func (d *dialError) Error() string { return "dial: " + d.err.Error() }

// slowRequest connects from ns to addr, sends an HTTP request header
// line by line over d, and checks the answer comes from a real server.
func slowRequest(ctx context.Context, ns, addr string, d time.Duration) error {
	var c net.Conn
	err := topo.InNS(ns, func() error {
		var err error
		c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp4", addr)
		return err
	})
	if err != nil {
		return &dialError{err}
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(d + 10*time.Second))
	name := fmt.Sprintf("%s -> %s", c.LocalAddr(), c.RemoteAddr())
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: storm\r\n"); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	const step = 200 * time.Millisecond
	for i := 0; time.Duration(i)*step < d; i++ {
		time.Sleep(step)
		if _, err := fmt.Fprintf(c, "X-Storm-%d: %d\r\n", i, i); err != nil {
			return fmt.Errorf("%s: established connection broken while sending its header: %w", name, err)
		}
	}
	if _, err := io.WriteString(c, "\r\n"); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return fmt.Errorf("%s: established connection broken, no answer: %w", name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "rs") {
		return fmt.Errorf("%s: answer %s %q (%v)", name, resp.Status, body, err)
	}
	return nil
}

// stormModel is what the services should be after the updates: the
// test's own account of ipvsadm's semantics.
type stormModel struct {
	vip, rs1, rs2 string
	svcs          map[string]*stormSvc // by "tcp:port" / "udp:port"
	pending       func()               // applies the last request to the model once lbd accepted it
}

type stormSvc struct {
	proto   string
	port    int
	sched   string
	persist uint32
	servers map[string]*stormRS // by "addr:port"
}

type stormRS struct {
	addr                 string
	port                 int
	weight, upper, lower int
}

const busyKey = "tcp:80"

func newStormModel(vip, rs1, rs2 string) *stormModel {
	m := &stormModel{vip: vip, rs1: rs1, rs2: rs2, svcs: map[string]*stormSvc{}}
	m.svcs[busyKey] = &stormSvc{proto: "tcp", port: 80, sched: "rr", servers: map[string]*stormRS{
		rs1 + ":8080": {addr: rs1, port: 8080, weight: 1},
		rs2 + ":8080": {addr: rs2, port: 8080, weight: 1},
	}}
	return m
}

func (m *stormModel) commit() {
	if m.pending != nil {
		m.pending()
		m.pending = nil
	}
}

// Schedulers the storm picks from (all cheap to build).
var (
	busyScheds  = []string{"rr", "wrr", "lc", "wlc", "sed", "nq"}
	otherScheds = []string{"rr", "wrr", "lc", "wlc", "sed", "nq", "sh", "dh", "fo", "ovf", "twos", "lblc", "lblcr"}
)

// next chooses the i-th update: a request, and whether lbd must refuse
// it. m.pending applies it to the model.
func (m *stormModel) next(rng *rand.Rand, i int) (api.Request, bool) {
	ptr := func(v int) *int { return &v }
	str := func(s string) *string { return &s }
	busy := m.svcs[busyKey]
	spec := func(s *stormSvc) *api.ServiceSpec {
		return &api.ServiceSpec{Protocol: s.proto, VIP: m.vip, Port: s.port}
	}
	if i%97 == 50 { // a refusal now and then: nothing may change
		switch rng.IntN(3) {
		case 0:
			return api.Request{Op: api.OpAddService, Service: spec(busy)}, true
		case 1:
			return api.Request{Op: api.OpDeleteServer, Service: spec(busy), Server: &api.ServerSpec{Address: m.rs1, Port: 9999}}, true
		default:
			return api.Request{Op: api.OpEditServer, Service: spec(busy),
				Server: &api.ServerSpec{Address: m.rs1, Port: 8080, Weight: ptr(70000)}}, true
		}
	}
	switch r := rng.IntN(100); {
	case r < 35: // an extra server of the busy service: add, edit or delete
		addr := []string{m.rs1, m.rs2}[rng.IntN(2)]
		port := 8081 + rng.IntN(2)
		key := fmt.Sprintf("%s:%d", addr, port)
		sv := &api.ServerSpec{Address: addr, Port: port}
		x, ok := busy.servers[key]
		switch {
		case !ok:
			w := rng.IntN(5)
			sv.Weight, sv.Forward = ptr(w), str("nat")
			m.pending = func() { busy.servers[key] = &stormRS{addr: addr, port: port, weight: w} }
			return api.Request{Op: api.OpAddServer, Service: spec(busy), Server: sv}, false
		case rng.IntN(2) == 0:
			w := rng.IntN(5)
			sv.Weight = ptr(w)
			m.pending = func() { x.weight = w }
			return api.Request{Op: api.OpEditServer, Service: spec(busy), Server: sv}, false
		default:
			m.pending = func() { delete(busy.servers, key) }
			return api.Request{Op: api.OpDeleteServer, Service: spec(busy), Server: sv}, false
		}
	case r < 50: // a weight of the busy service's own servers; rs1:8080 keeps >= 1
		x := busy.servers[m.rs1+":8080"]
		w := 1 + rng.IntN(5)
		if rng.IntN(2) == 0 {
			x = busy.servers[m.rs2+":8080"]
			w = rng.IntN(6)
		}
		m.pending = func() { x.weight = w }
		return api.Request{Op: api.OpEditServer, Service: spec(busy),
			Server: &api.ServerSpec{Address: x.addr, Port: x.port, Weight: ptr(w)}}, false
	case r < 55: // the busy service's scheduler
		s := busyScheds[rng.IntN(len(busyScheds))]
		m.pending = func() { busy.sched = s }
		return api.Request{Op: api.OpEditService, Service: &api.ServiceSpec{Protocol: "tcp", VIP: m.vip, Port: 80, Scheduler: &s}}, false
	}
	// Another service: TCP 81..88 or UDP 53..56.
	proto, port := "tcp", 81+rng.IntN(8)
	if rng.IntN(4) == 0 {
		proto, port = "udp", 53+rng.IntN(4)
	}
	key := fmt.Sprintf("%s:%d", proto, port)
	s, ok := m.svcs[key]
	if !ok {
		sched := otherScheds[rng.IntN(len(otherScheds))]
		persist := []uint32{0, 0, 60, 300}[rng.IntN(4)]
		sp := &api.ServiceSpec{Protocol: proto, VIP: m.vip, Port: port, Scheduler: &sched, Persistence: &persist}
		m.pending = func() {
			m.svcs[key] = &stormSvc{proto: proto, port: port, sched: sched, persist: persist, servers: map[string]*stormRS{}}
		}
		return api.Request{Op: api.OpAddService, Service: sp}, false
	}
	switch r := rng.IntN(100); {
	case r < 10:
		m.pending = func() { delete(m.svcs, key) }
		return api.Request{Op: api.OpDeleteService, Service: spec(s)}, false
	case r < 25:
		sched := otherScheds[rng.IntN(len(otherScheds))]
		persist := []uint32{0, 60, 300}[rng.IntN(3)]
		m.pending = func() { s.sched, s.persist = sched, persist }
		sp := spec(s)
		sp.Scheduler, sp.Persistence = &sched, &persist
		return api.Request{Op: api.OpEditService, Service: sp}, false
	}
	addr := []string{m.rs1, m.rs2}[rng.IntN(2)]
	rport := []int{8080, 8081, 8082, 9000}[rng.IntN(4)]
	rkey := fmt.Sprintf("%s:%d", addr, rport)
	sv := &api.ServerSpec{Address: addr, Port: rport}
	x, ok := s.servers[rkey]
	switch {
	case !ok:
		w, up := rng.IntN(10), []int{0, 0, 100, 5000}[rng.IntN(4)]
		lo := up / 2
		sv.Weight, sv.Upper, sv.Lower, sv.Forward = ptr(w), ptr(up), ptr(lo), str("nat")
		m.pending = func() { s.servers[rkey] = &stormRS{addr: addr, port: rport, weight: w, upper: up, lower: lo} }
		return api.Request{Op: api.OpAddServer, Service: spec(s), Server: sv}, false
	case rng.IntN(3) == 0:
		m.pending = func() { delete(s.servers, rkey) }
		return api.Request{Op: api.OpDeleteServer, Service: spec(s), Server: sv}, false
	default:
		w := rng.IntN(10)
		sv.Weight = ptr(w)
		m.pending = func() { x.weight = w }
		return api.Request{Op: api.OpEditServer, Service: spec(s), Server: sv}, false
	}
}

// services renders the model as lbd lists services (for api.WriteSave).
func (m *stormModel) services() []api.Service {
	var out []api.Service
	for _, s := range m.svcs {
		as := api.Service{Protocol: strings.ToUpper(s.proto), VIP: m.vip, Port: uint16(s.port), Scheduler: s.sched, Persistence: s.persist}
		for _, x := range s.servers {
			as.Servers = append(as.Servers, api.RealServer{Address: x.addr, Port: uint16(x.port), Forward: "Masq",
				Weight: x.weight, Upper: x.upper, Lower: x.lower})
		}
		out = append(out, as)
	}
	return out // WriteSave sorts as lbd's listing does
}

func specString(s *api.ServiceSpec) string {
	if s == nil {
		return ""
	}
	return s.String()
}

func serverString(s *api.ServerSpec) string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf("-r %s:%d", s.Address, s.Port)
}
