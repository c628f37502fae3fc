package ctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
)

// Ops answers lbctl: the listing, and the ipvsadm-style edits. Every edit
// takes a copy of the running services (Controller.Services), changes it
// and hands the whole set to Controller.Apply, so that an edit is applied
// entirely or not at all. Ops serialises the edits, so none is lost.
//
// The dataplane's counters only grow; -Z and re-added real servers are
// handled with a per-server baseline that the listing subtracts. The
// Prometheus counters are not affected (they must stay monotonic).
type Ops struct {
	c        *Controller
	log      *zap.Logger
	path     string             // configuration file for reload; "" refuses reload
	started  conf.Config        // the configuration lbd started with
	setLevel func(string) error // changes the log level on reload; nil: log.level needs a restart

	mu    sync.Mutex
	base  map[destKey]api.Stats // subtracted from the dataplane's counters in listings
	rates *Rates                // fills the listings' rates; nil: rates stay 0
}

// destKey names a real server of a service.
type destKey struct {
	proto     string // "tcp" | "udp"
	vip, addr netip.Addr
	port      uint16 // the service's
	rport     uint16
}

// NewOps serves lbctl for c. started is the configuration lbd runs with
// and path the file it came from (reload re-reads it); setLevel, if not
// nil, applies a new log.level on reload.
func NewOps(c *Controller, started conf.Config, path string, setLevel func(string) error, log *zap.Logger) *Ops {
	return &Ops{c: c, log: log, path: path, started: started, setLevel: setLevel, base: map[destKey]api.Stats{}}
}

// Handle answers one request (api.Handler).
func (o *Ops) Handle(_ context.Context, req api.Request) api.Response {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch req.Op {
	case api.OpList:
		return o.list()
	case api.OpSave:
		var b bytes.Buffer
		svcs, _ := o.c.Services()
		api.WriteSave(&b, apiServices(svcs))
		return api.Response{Text: b.String()}
	case api.OpReload:
		restart, err := o.reload()
		if err != nil {
			return o.refuse(req, err)
		}
		return api.Response{Restart: restart}
	case api.OpZero:
		if err := o.zero(req.Service); err != nil {
			return o.refuse(req, err)
		}
		o.log.Info("counters zeroed", zap.String("service", serviceOrAll(req.Service)))
		return api.Response{}
	case api.OpConnections:
		resp, err := o.c.connections(req)
		if err != nil {
			return o.refuse(req, err)
		}
		return resp
	case api.OpAddService, api.OpEditService, api.OpDeleteService, api.OpAddServer, api.OpEditServer,
		api.OpDeleteServer, api.OpClear, api.OpSetTimeouts, api.OpRestore:
		svcs, t := o.c.Services()
		var err error
		if req.Op == api.OpRestore {
			svcs, err = restore(svcs, &t, req.Text)
		} else {
			svcs, err = edit(svcs, &t, req)
		}
		if err == nil {
			err = o.apply(svcs, t)
		}
		if err != nil {
			return o.refuse(req, err)
		}
		o.logDone(req, len(svcs))
		return api.Response{}
	}
	return o.refuse(req, fmt.Errorf("unknown operation %q", req.Op))
}

func (o *Ops) refuse(req api.Request, err error) api.Response {
	o.log.Warn("refused", zap.String("op", req.Op), zap.String("error", err.Error()))
	return api.Response{Error: err.Error()}
}

func (o *Ops) logDone(req api.Request, n int) {
	msg := map[string]string{
		api.OpAddService: "service added", api.OpEditService: "service edited", api.OpDeleteService: "service deleted",
		api.OpAddServer: "server added", api.OpEditServer: "server edited", api.OpDeleteServer: "server removed",
		api.OpClear: "services cleared", api.OpSetTimeouts: "timeouts set", api.OpRestore: "services restored",
	}[req.Op]
	fields := []zap.Field{zap.Int("services", n)}
	if req.Service != nil {
		fields = append(fields, zap.String("service", req.Service.String()))
	}
	if req.Server != nil {
		fields = append(fields, zap.String("server", serverName(*req.Server)))
	}
	if req.Timeouts != nil {
		fields = append(fields, zap.Int("tcp", req.Timeouts.TCP), zap.Int("tcpfin", req.Timeouts.TCPFin), zap.Int("udp", req.Timeouts.UDP))
	}
	o.log.Info(msg, fields...)
}

// apply hands svcs and t to the controller; real servers that appear get
// a baseline of the counters their id already has (a server removed and
// added again starts from zero, as in IPVS).
func (o *Ops) apply(svcs []conf.Service, t conf.Timeouts) error {
	old, _ := o.c.Services()
	had := map[destKey]bool{}
	for _, s := range old {
		for _, rs := range s.Servers {
			had[keyOf(s, rs)] = true
		}
	}
	added := map[destKey]api.Stats{}
	for _, s := range svcs {
		for _, rs := range s.Servers {
			if k := keyOf(s, rs); !had[k] {
				ds, _ := o.c.destStatsOf(s, rs)
				added[k] = counters(ds)
			}
		}
	}
	if err := o.c.Apply(svcs, t); err != nil {
		return explain(err, svcs)
	}
	kept := map[destKey]bool{}
	for _, s := range svcs {
		for _, rs := range s.Servers {
			kept[keyOf(s, rs)] = true
		}
	}
	for k := range o.base {
		if !kept[k] {
			delete(o.base, k)
		}
	}
	for k, b := range added {
		o.base[k] = b
	}
	return nil
}

// destStatsOf reads the dataplane's counters of a real server of a
// service, present or removed; false if it never had an id.
func (c *Controller) destStatsOf(s conf.Service, rs conf.RealServer) (lcore.DestStats, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := lcore.ServiceKey{VIP: ipv4(s.VIPAddr()), Port: uint16(s.Port), Proto: protocols[s.Protocol]}
	ids := c.ids.clone()
	next := ids.next
	id, err := ids.get(key, ipv4(rs.Addr()), uint16(rs.Port))
	if err != nil || ids.next != next {
		return lcore.DestStats{}, false
	}
	return c.dp.DestStats(id), true
}

func counters(ds lcore.DestStats) api.Stats {
	return api.Stats{
		Conns: ds[lcore.DestConns], InPkts: ds[lcore.DestInPkts], OutPkts: ds[lcore.DestOutPkts],
		InBytes: ds[lcore.DestInBytes], OutBytes: ds[lcore.DestOutBytes],
	}
}

func keyOf(s conf.Service, rs conf.RealServer) destKey {
	return destKey{proto: s.Protocol, vip: s.VIPAddr(), port: uint16(s.Port), addr: rs.Addr(), rport: uint16(rs.Port)}
}

func apiKey(s api.Service, rs api.RealServer) destKey {
	vip, _ := netip.ParseAddr(s.VIP)
	addr, _ := netip.ParseAddr(rs.Address)
	return destKey{proto: strings.ToLower(s.Protocol), vip: vip, port: s.Port, addr: addr, rport: rs.Port}
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// list is the controller's listing with the settings ipvsadm shows and
// the baselines subtracted.
func (o *Ops) list() api.Response {
	resp := o.c.list()
	svcs, _ := o.c.Services()
	byKey := map[[3]string]conf.Service{}
	for _, s := range svcs {
		byKey[[3]string{strings.ToUpper(s.Protocol), s.VIPAddr().String(), strconv.Itoa(s.Port)}] = s
	}
	for i := range resp.Services {
		as := &resp.Services[i]
		cs, ok := byKey[[3]string{as.Protocol, as.VIP, strconv.Itoa(int(as.Port))}]
		if ok {
			as.Persistence = uint32(cs.Persistence / time.Second)
			if cs.Persistence != 0 && cs.Netmask != "" && cs.Netmask != "255.255.255.255" {
				as.Netmask = cs.Netmask
			}
			if len(cs.SchedFlags) > 0 {
				as.SchedFlags = append([]string(nil), cs.SchedFlags...)
			}
		}
		as.Stats = api.Stats{}
		for j := range as.Servers {
			rs := &as.Servers[j]
			if ok {
				for _, c := range cs.Servers {
					if c.Addr().String() == rs.Address && c.Port == int(rs.Port) {
						rs.Upper, rs.Lower = c.Upper, c.Lower
					}
				}
			}
			b := o.base[apiKey(*as, *rs)]
			rs.Stats = api.Stats{
				Conns: sub(rs.Stats.Conns, b.Conns), InPkts: sub(rs.Stats.InPkts, b.InPkts), OutPkts: sub(rs.Stats.OutPkts, b.OutPkts),
				InBytes: sub(rs.Stats.InBytes, b.InBytes), OutBytes: sub(rs.Stats.OutBytes, b.OutBytes),
			}
			as.Stats.Conns += rs.Stats.Conns
			as.Stats.InPkts += rs.Stats.InPkts
			as.Stats.OutPkts += rs.Stats.OutPkts
			as.Stats.InBytes += rs.Stats.InBytes
			as.Stats.OutBytes += rs.Stats.OutBytes
		}
	}
	if o.rates != nil {
		o.rates.Fill(&resp)
	}
	return resp
}

// zero sets the baselines of one service's servers (all when spec is
// nil) to their counters now.
func (o *Ops) zero(spec *api.ServiceSpec) error {
	if spec != nil {
		if err := spec.Check(); err != nil {
			return err
		}
		svcs, _ := o.c.Services()
		if findService(svcs, *spec) < 0 {
			return fmt.Errorf("-Z %s: service does not exist", spec)
		}
	}
	raw := o.c.list()
	var zeroed []api.Service
	for _, s := range raw.Services {
		if spec != nil && (strings.ToLower(s.Protocol) != spec.Protocol || s.VIP != addrString(spec.VIP) || int(s.Port) != spec.Port) {
			continue
		}
		for _, rs := range s.Servers {
			o.base[apiKey(s, rs)] = rs.Stats
		}
		zeroed = append(zeroed, s)
	}
	if o.rates != nil {
		o.rates.Zero(zeroed)
	}
	return nil
}

func addrString(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return s
	}
	return a.String()
}

func serverName(r api.ServerSpec) string {
	if r.Port == 0 {
		return r.Address
	}
	return fmt.Sprintf("%s:%d", r.Address, r.Port)
}

// serviceOrAll names a request's service, "all" when there is none.
func serviceOrAll(s *api.ServiceSpec) string {
	if s == nil {
		return "all"
	}
	return s.String()
}

// findService returns the index of spec's service in svcs, or -1.
func findService(svcs []conf.Service, spec api.ServiceSpec) int {
	vip, _ := netip.ParseAddr(spec.VIP)
	for i, s := range svcs {
		if s.Protocol == spec.Protocol && s.VIPAddr() == vip && s.Port == spec.Port {
			return i
		}
	}
	return -1
}

// findServer returns the index of spec's server in s, or -1.
func findServer(s conf.Service, spec api.ServerSpec) int {
	addr, _ := netip.ParseAddr(spec.Address)
	port := spec.Port
	if port == 0 {
		port = s.Port
	}
	for i, rs := range s.Servers {
		if rs.Addr() == addr && rs.Port == port {
			return i
		}
	}
	return -1
}

// edit applies one table-changing request to svcs and t, which it may
// modify; refusals name the command and its arguments.
func edit(svcs []conf.Service, t *conf.Timeouts, req api.Request) ([]conf.Service, error) {
	cmd := map[string]string{
		api.OpAddService: "-A", api.OpEditService: "-E", api.OpDeleteService: "-D",
		api.OpAddServer: "-a", api.OpEditServer: "-e", api.OpDeleteServer: "-d",
	}[req.Op]
	switch req.Op {
	case api.OpClear:
		return []conf.Service{}, nil
	case api.OpSetTimeouts:
		if req.Timeouts == nil {
			return nil, errors.New("--set: no timeouts given")
		}
		for _, v := range []struct {
			name string
			sec  int
			dst  *time.Duration
		}{{"tcp", req.Timeouts.TCP, &t.TCP}, {"tcpfin", req.Timeouts.TCPFin, &t.TCPFin}, {"udp", req.Timeouts.UDP, &t.UDP}} {
			if v.sec < 0 || v.sec > api.MaxTimeout {
				return nil, fmt.Errorf("--set: %s timeout %d is out of range 0..%d seconds", v.name, v.sec, api.MaxTimeout)
			}
			if v.sec != 0 {
				*v.dst = time.Duration(v.sec) * time.Second
			}
		}
		return svcs, nil
	}
	if req.Service == nil {
		return nil, fmt.Errorf("%s needs a service: -t|-u VIP:port", cmd)
	}
	spec := *req.Service
	if err := spec.Check(); err != nil {
		return nil, fmt.Errorf("%s %w", cmd, err)
	}
	spec.VIP = addrString(spec.VIP)
	at := findService(svcs, spec)
	switch req.Op {
	case api.OpAddService:
		if at >= 0 {
			return nil, fmt.Errorf("-A %s: service already exists", spec)
		}
		s := conf.Service{Protocol: spec.Protocol, VIP: spec.VIP, Port: spec.Port, Scheduler: "rr",
			SchedFlags: []string{}, Netmask: "255.255.255.255", Servers: []conf.RealServer{}}
		setService(&s, spec)
		return append(svcs, s), nil
	}
	if at < 0 {
		return nil, fmt.Errorf("%s %s: service does not exist", cmd, spec)
	}
	switch req.Op {
	case api.OpEditService:
		setService(&svcs[at], spec)
		return svcs, nil
	case api.OpDeleteService:
		return append(svcs[:at], svcs[at+1:]...), nil
	}
	if req.Server == nil {
		return nil, fmt.Errorf("%s %s needs a real server: -r RIP[:port]", cmd, spec)
	}
	rspec := *req.Server
	if err := rspec.Check(); err != nil {
		return nil, fmt.Errorf("%s %s %w", cmd, spec, err)
	}
	s := &svcs[at]
	j := findServer(*s, rspec)
	if rspec.Port == 0 {
		rspec.Port = s.Port
	}
	name := fmt.Sprintf("%s %s -r %s:%d", cmd, spec, addrString(rspec.Address), rspec.Port)
	switch req.Op {
	case api.OpAddServer:
		if j >= 0 {
			return nil, fmt.Errorf("%s: server already exists", name)
		}
		rs := conf.RealServer{Address: addrString(rspec.Address), Port: rspec.Port, Weight: 1, Forward: "nat"}
		if err := setServer(&rs, rspec, name); err != nil {
			return nil, err
		}
		s.Servers = append(s.Servers, rs)
		return svcs, nil
	}
	if j < 0 {
		return nil, fmt.Errorf("%s: server does not exist", name)
	}
	if req.Op == api.OpDeleteServer {
		s.Servers = append(s.Servers[:j], s.Servers[j+1:]...)
		return svcs, nil
	}
	if err := setServer(&s.Servers[j], rspec, name); err != nil {
		return nil, err
	}
	return svcs, nil
}

// setService copies the settings spec carries.
func setService(s *conf.Service, spec api.ServiceSpec) {
	if spec.Scheduler != nil {
		s.Scheduler = *spec.Scheduler
	}
	if spec.Persistence != nil {
		s.Persistence = time.Duration(*spec.Persistence) * time.Second
	}
	if spec.Netmask != nil {
		s.Netmask = *spec.Netmask
	}
	if spec.SchedFlags != nil {
		s.SchedFlags = append([]string{}, *spec.SchedFlags...)
	}
}

// setServer copies the settings spec carries; name prefixes refusals.
func setServer(rs *conf.RealServer, spec api.ServerSpec, name string) error {
	if spec.Forward != nil {
		rs.Forward = *spec.Forward
	}
	for _, v := range []struct {
		flag, what string
		src        *int
		max        int
		dst        *int
	}{
		{"-w", "weight", spec.Weight, 65535, &rs.Weight},
		{"-x", "upper threshold", spec.Upper, api.MaxThreshold, &rs.Upper},
		{"-y", "lower threshold", spec.Lower, api.MaxThreshold, &rs.Lower},
	} {
		switch {
		case v.src == nil:
		case *v.src < 0:
			return fmt.Errorf("%s: %s %d: %s is negative", name, v.flag, *v.src, v.what)
		case *v.src > v.max:
			return fmt.Errorf("%s: %s %d: %s is out of range 0..%d", name, v.flag, *v.src, v.what, v.max)
		default:
			*v.dst = *v.src
		}
	}
	return nil
}

// restore applies ipvsadm -R text to svcs and t, line by line, in memory.
func restore(svcs []conf.Service, t *conf.Timeouts, text string) ([]conf.Service, error) {
	reqs, err := api.ParseRestore(text)
	if err != nil {
		return nil, err
	}
	lines := restoreLines(text)
	for i, req := range reqs {
		if svcs, err = edit(svcs, t, req); err != nil {
			return nil, fmt.Errorf("line %d: %w", lines[i], err)
		}
	}
	return svcs, nil
}

// restoreLines numbers the lines ParseRestore turns into requests.
func restoreLines(text string) []int {
	var n []int
	for i, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		n = append(n, i+1)
	}
	return n
}

// apiServices describes configured services as the listing does, without
// counters (for save).
func apiServices(svcs []conf.Service) []api.Service {
	out := make([]api.Service, 0, len(svcs))
	for _, s := range svcs {
		as := api.Service{Protocol: strings.ToUpper(s.Protocol), VIP: s.VIPAddr().String(), Port: uint16(s.Port),
			Scheduler: s.Scheduler, Persistence: uint32(s.Persistence / time.Second), SchedFlags: s.SchedFlags}
		if s.Persistence != 0 && s.Netmask != "255.255.255.255" {
			as.Netmask = s.Netmask
		}
		for _, rs := range s.Servers {
			as.Servers = append(as.Servers, api.RealServer{Address: rs.Addr().String(), Port: uint16(rs.Port),
				Forward: forwardNames[forwardMethods[rs.Forward]], Weight: rs.Weight, Upper: rs.Upper, Lower: rs.Lower})
		}
		out = append(out, as)
	}
	return out
}

// fieldRE splits a configuration path of a service setting.
var fieldRE = regexp.MustCompile(`^services\[(\d+)\](?:\.servers\[(\d+)\])?(?:\.([a-z_]+)(?:\[\d+\])?)?$`)

// flagOf names the ipvsadm option of a configuration field.
var flagOf = map[string]string{
	"scheduler": "-s", "sched_flags": "-b", "persistence": "-p", "netmask": "-M",
	"weight": "-w", "upper_threshold": "-x", "lower_threshold": "-y", "forward": "-g|-i|-m",
	"timeouts.tcp": "--set tcp", "timeouts.tcp_fin": "--set tcpfin", "timeouts.udp": "--set udp",
}

// explain turns a refusal of Apply, which names configuration fields,
// into one that names the service, the server and the option.
func explain(err error, svcs []conf.Service) error {
	field, msg, ok := strings.Cut(err.Error(), ": ")
	var fe *conf.FieldError
	if errors.As(err, &fe) {
		field, msg, ok = fe.Field, fe.Msg, true
	}
	if !ok {
		return err
	}
	if f, ok := flagOf[field]; ok {
		return fmt.Errorf("%s: %s", f, msg)
	}
	m := fieldRE.FindStringSubmatch(field)
	if m == nil {
		return err
	}
	i, _ := strconv.Atoi(m[1])
	if i >= len(svcs) {
		return err
	}
	s := svcs[i]
	name := api.ServiceSpec{Protocol: s.Protocol, VIP: s.VIP, Port: s.Port}.String()
	if m[2] != "" {
		j, _ := strconv.Atoi(m[2])
		if j >= len(s.Servers) {
			return err
		}
		name += fmt.Sprintf(" -r %s:%d", s.Servers[j].Address, s.Servers[j].Port)
	}
	if f, ok := flagOf[m[3]]; ok {
		return fmt.Errorf("%s: %s: %s", name, f, msg)
	}
	return fmt.Errorf("%s: %s", name, msg)
}

// Reload re-reads the configuration file and applies its services and
// timeouts; it returns the settings that differ from the running ones
// and need a restart.
func (o *Ops) Reload() ([]string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reload()
}

func (o *Ops) reload() ([]string, error) {
	if o.path == "" {
		return nil, errors.New("reload: lbd was started without a configuration file")
	}
	cfg, err := conf.Load(o.path)
	if err == nil {
		err = cfg.Validate(Schedulers())
		if err != nil {
			err = fmt.Errorf("%s: %w", o.path, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reload: %w; nothing changed", err)
	}
	restart := restartFields(o.started, cfg)
	if cfg.Log.Level != o.started.Log.Level {
		if o.setLevel == nil {
			restart = append(restart, "log.level")
		} else if err := o.setLevel(cfg.Log.Level); err != nil {
			return nil, fmt.Errorf("reload: log.level: %w; nothing changed", err)
		}
	}
	if err := o.apply(cfg.Services, cfg.Timeouts); err != nil {
		return nil, fmt.Errorf("reload: %s: %w; nothing changed", o.path, err)
	}
	if o.setLevel != nil {
		o.started.Log.Level = cfg.Log.Level
	}
	o.log.Info("reloaded", zap.String("path", o.path), zap.Int("services", len(cfg.Services)),
		zap.Strings("need_restart", restart))
	return restart, nil
}

// restartFields lists the settings, by YAML path, that differ between a
// and b and take effect only on a restart: everything but services,
// timeouts and log.level.
func restartFields(a, b conf.Config) []string {
	var out []string
	diffFields(reflect.ValueOf(a), reflect.ValueOf(b), "", &out)
	return out
}

func diffFields(a, b reflect.Value, path string, out *[]string) {
	switch a.Kind() {
	case reflect.Struct:
		t := a.Type()
		for i := range t.NumField() {
			key := t.Field(i).Tag.Get("mapstructure")
			p := key
			if path != "" {
				p = path + "." + key
			}
			switch p {
			case "services", "timeouts", "log.level":
				continue
			}
			diffFields(a.Field(i), b.Field(i), p, out)
		}
	case reflect.Slice:
		if a.Len() != b.Len() || a.Type().Elem().Kind() != reflect.Struct {
			if !reflect.DeepEqual(a.Interface(), b.Interface()) {
				*out = append(*out, path)
			}
			return
		}
		for i := range a.Len() {
			diffFields(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, path)
		}
	}
}
