package ctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/ctl/connsync"
	"github.com/dplb/dplb/lcore"
)

// Ops answers lbctl: it dispatches each request to the listing, an edit
// (edit.go), a restore, a save, a reload (reload.go) or -Z. Every edit
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
	syncd    *connsync.Daemon   // the sync daemon; nil without sync.key_file (see SetSync)
	ann      *announcer         // the BGP announcer; nil while BGP is off

	mu    sync.Mutex
	base  baselines      // subtracted from the dataplane's counters in listings
	rates *RateEstimator // fills the listings' rates; nil: rates stay 0
	// edits are the last maxEdits edits asked for, with their authors
	// (api.OpEdits); editSeq numbers them.
	edits   []api.Edit
	editSeq uint64
	// upgrade serves api.OpUpgrade (RunOptions.Upgrade); nil refuses it.
	upgrade func(binary string) (string, error)

	// file and fileTimeouts are the configuration's services as lbd last
	// read them (carry.go); fileMu, not mu, guards them: the handover
	// reads them while an upgrade request may hold mu.
	fileMu       sync.Mutex
	file         []conf.Service
	fileTimeouts conf.Timeouts
}

// NewOps serves lbctl for c. started is the configuration lbd runs with
// and path the file it came from (reload re-reads it); setLevel, if not
// nil, applies a new log.level on reload; rates, if not nil, fills the
// listings' rates.
func NewOps(c *Controller, started conf.Config, path string, setLevel func(string) error, rates *RateEstimator, log *zap.Logger) *Ops {
	o := &Ops{c: c, log: log, path: path, started: started, setLevel: setLevel, rates: rates, base: baselines{}}
	o.readFile(started.Services, started.Timeouts)
	return o
}

// SetSync gives lbctl's sync daemon verbs the daemon to drive (nil: they
// refuse, naming sync.key_file). Call it before serving.
func (o *Ops) SetSync(d *connsync.Daemon) { o.syncd = d }

// Handle answers one request (api.Handler). Edits are logged and kept
// (api.OpEdits) with their author, which ctx carries (api.WithAuthor).
func (o *Ops) Handle(ctx context.Context, req api.Request) api.Response {
	o.mu.Lock()
	defer o.mu.Unlock()
	if req.DryRun { // changes nothing: not an edit
		if req.Op != api.OpRestore {
			return o.refuse(authorOf(ctx), req, fmt.Errorf("a dry run is for restores (-R --dry-run), not %q", req.Op))
		}
		return o.handle(authorOf(ctx), req)
	}
	who := authorOf(ctx)
	resp := o.handle(who, req)
	if isEdit(req.Op) && !(req.Op == api.OpHAState && req.HAState == "") {
		o.recordEdit(who, req, resp)
	}
	return resp
}

func (o *Ops) handle(who api.Author, req api.Request) api.Response {
	switch req.Op {
	case api.OpList:
		return o.view().Response()
	case api.OpEdits:
		return api.Response{Edits: slices.Clone(o.edits)}
	case api.OpTimeouts:
		_, t := o.c.Services()
		return api.Response{Timeouts: timeoutsSpec(t)}
	case api.OpDiff:
		resp, err := o.staged(req)
		if err != nil {
			return o.refuse(who, req, err)
		}
		return resp
	case api.OpTrace:
		resp, err := o.c.trace(req)
		if err != nil {
			return o.refuse(who, req, err)
		}
		return resp
	case api.OpSave:
		var b bytes.Buffer
		svcs, _ := o.c.Services()
		api.WriteSave(&b, saved(svcs))
		return api.Response{Text: b.String()}
	case api.OpReload:
		restart, err := o.reload(who)
		if err != nil {
			return o.refuse(who, req, err)
		}
		return api.Response{Restart: restart}
	case api.OpZero:
		if err := o.zero(req.Service); err != nil {
			return o.refuse(who, req, err)
		}
		o.log.Info("counters zeroed", append(authorFields(who), zap.String("service", serviceOrAll(req.Service)))...)
		return api.Response{}
	case api.OpUpgrade:
		if o.upgrade == nil {
			return o.refuse(who, req, errors.New("this lbd cannot upgrade itself"))
		}
		bin, err := o.upgrade(req.Binary)
		if err != nil {
			return o.refuse(who, req, fmt.Errorf("upgrade refused, lbd keeps running: %w", err))
		}
		o.log.Info("upgrade: handing over to a new binary", append(authorFields(who), zap.String("binary", bin))...)
		return api.Response{Text: bin}
	case api.OpStartDaemon, api.OpStopDaemon, api.OpDaemons:
		resp, err := o.syncVerb(req)
		if err != nil {
			return o.refuse(who, req, err)
		}
		return resp
	case api.OpDrain, api.OpUndrain, api.OpBGP:
		resp, err := o.bgpVerb(who, req)
		if err != nil {
			return o.refuse(who, req, err)
		}
		return resp
	case api.OpHAState:
		if req.HAState != "" {
			if req.HAState != "master" && req.HAState != "backup" {
				return o.refuse(who, req, fmt.Errorf("ha state %q: want master or backup", req.HAState))
			}
			if err := o.c.SetHAState(req.HAState == "master"); err != nil {
				return o.refuse(who, req, err)
			}
			o.log.Info("ha state set", append(authorFields(who), zap.String("state", req.HAState))...)
		}
		return api.Response{HAState: o.c.HAState()}
	case api.OpHACheck:
		return api.Response{HAState: o.c.HAState(), Links: o.c.Links()}
	case api.OpLinks:
		return api.Response{Links: o.c.Links()}
	case api.OpConnections:
		resp, err := o.c.connections(req)
		if err != nil {
			return o.refuse(who, req, err)
		}
		return resp
	case api.OpGetLaddr:
		resp, err := o.c.localAddresses(req.Service)
		if err != nil {
			return o.refuse(who, req, err)
		}
		return resp
	case api.OpGetBlklst, api.OpGetWhtlst:
		resp, err := o.c.clientLists(req)
		if err != nil {
			return o.refuse(who, req, err)
		}
		return resp
	case api.OpAddService, api.OpEditService, api.OpDeleteService, api.OpAddServer, api.OpEditServer,
		api.OpDeleteServer, api.OpClear, api.OpSetTimeouts, api.OpRestore, api.OpAddLaddr, api.OpDelLaddr,
		api.OpAddBlklst, api.OpDelBlklst, api.OpAddWhtlst, api.OpDelWhtlst:
		if req.Op == api.OpRestore && req.DryRun {
			resp, err := o.staged(req)
			if err != nil {
				return o.refuse(who, req, err)
			}
			return resp
		}
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
			return o.refuse(who, req, err)
		}
		o.logDone(who, req, len(svcs))
		return api.Response{}
	}
	return o.refuse(who, req, fmt.Errorf("unknown operation %q", req.Op))
}

func (o *Ops) refuse(who api.Author, req api.Request, err error) api.Response {
	o.log.Warn("refused", append(authorFields(who), zap.String("op", req.Op), zap.String("error", err.Error()))...)
	return api.Response{Error: err.Error()}
}

func (o *Ops) logDone(who api.Author, req api.Request, n int) {
	msg := map[string]string{
		api.OpAddService: "service added", api.OpEditService: "service edited", api.OpDeleteService: "service deleted",
		api.OpAddServer: "server added", api.OpEditServer: "server edited", api.OpDeleteServer: "server removed",
		api.OpClear: "services cleared", api.OpSetTimeouts: "timeouts set", api.OpRestore: "services restored",
		api.OpAddLaddr: "local address added", api.OpDelLaddr: "local address removed",
		api.OpAddBlklst: "client blocked", api.OpDelBlklst: "client unblocked",
		api.OpAddWhtlst: "client allowed", api.OpDelWhtlst: "client no longer allowed",
	}[req.Op]
	fields := append(authorFields(who), zap.Int("services", n))
	if req.Service != nil {
		fields = append(fields, zap.String("service", req.Service.String()))
	}
	if req.Server != nil {
		fields = append(fields, zap.String("server", serverName(*req.Server)))
	}
	if req.LocalAddress != "" {
		fields = append(fields, zap.String("local_address", req.LocalAddress))
	}
	if req.ClientPrefix != "" {
		fields = append(fields, zap.String("client_prefix", req.ClientPrefix))
	}
	if req.Timeouts != nil {
		fields = append(fields, zap.Int("tcp", req.Timeouts.TCP), zap.Int("tcpfin", req.Timeouts.TCPFin), zap.Int("udp", req.Timeouts.UDP))
	}
	o.log.Info(msg, fields...)
}

// baselines is a copy of the listing's baselines (for a handover).
func (o *Ops) baselines() baselines {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.base)
}

// View is the listing as lbctl sees it, typed: counters less their
// baselines, with rates.
func (o *Ops) View() View {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.view()
}

// view is View; the caller holds mu.
func (o *Ops) view() View {
	v := o.c.view(o.base)
	if o.rates != nil {
		o.rates.Fill(&v)
	}
	return v
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
	if err := o.c.Apply(svcs, t); err != nil {
		return explain(err, svcs)
	}
	kept := map[destKey]bool{}
	for _, s := range svcs {
		for _, rs := range s.Servers {
			k := keyOf(s, rs)
			kept[k] = true
			if !had[k] {
				o.base[k], _ = o.c.counters(k)
			}
		}
	}
	for k := range o.base {
		if !kept[k] {
			delete(o.base, k)
		}
	}
	return nil
}

// zero sets the baselines of one service's servers (all when spec is
// nil) to their counters now, and restarts their rates.
func (o *Ops) zero(spec *api.ServiceSpec) error {
	var only *lcore.ServiceKey
	if spec != nil {
		if err := spec.Check(); err != nil {
			return err
		}
		svcs, _ := o.c.Services()
		i := findService(svcs, *spec)
		if i < 0 {
			return fmt.Errorf("-Z %s: service does not exist", spec)
		}
		k := serviceKey(svcs[i])
		only = &k
	}
	raw := o.c.view(nil)
	for i := range raw.Services {
		s := &raw.Services[i]
		if only != nil && s.Key != *only {
			continue
		}
		s.each(func(r *ServerView) { o.base[r.key] = r.Stats })
		if o.rates != nil {
			o.rates.Zero(s)
		}
	}
	return nil
}

func serverName(r api.ServerSpec) string {
	if r.Port == 0 {
		return r.Address
	}
	if strings.Contains(r.Address, ":") {
		return fmt.Sprintf("[%s]:%d", r.Address, r.Port)
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
