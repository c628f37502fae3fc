package web

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/ctl/api"
)

// target names what a request is about, as lbctl's messages do.
func target(req api.Request) string {
	var parts []string
	if req.Service != nil {
		parts = append(parts, req.Service.Protocol+" "+req.Service.VIP+":"+strconv.Itoa(req.Service.Port))
	}
	if req.Server != nil {
		parts = append(parts, "-> "+req.Server.Address+":"+strconv.Itoa(req.Server.Port))
		if req.Server.Weight != nil {
			parts = append(parts, "weight "+strconv.Itoa(*req.Server.Weight))
		}
	}
	return strings.Join(parts, " ")
}

func (m *monitor) recordAudit(ses session, req api.Request, result string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addAudit(AuditEntry{Time: time.Now(), User: ses.user, Role: ses.role, Via: api.ViaConsole, Op: req.Op, Target: target(req), Result: result, Req: &req})
}

// addAudit appends an entry; the caller holds mu.
func (m *monitor) addAudit(a AuditEntry) {
	m.audit = append(m.audit, a)
	if len(m.audit) > maxAudit {
		m.audit = m.audit[len(m.audit)-maxAudit:]
	}
}

// takeEdits adds lbd's edits that did not come from the console (lbctl,
// SIGHUP), newer than the last taken, to the audit and, when applied, to
// the events, with their authors. The caller holds mu.
func (m *monitor) takeEdits(resp api.Response) {
	for _, e := range resp.Edits {
		if e.Seq <= m.editSeq {
			continue
		}
		m.editSeq = e.Seq
		if e.Via == api.ViaConsole {
			continue // the console's own edits are in already, with the role
		}
		m.addAudit(AuditEntry{Time: e.Time, User: e.User, Via: e.Via, Op: e.Op, Target: e.Target, Result: e.Result})
		if e.Result != "ok" {
			continue
		}
		kind := "edit"
		if e.Op == api.OpReload {
			kind = "reload"
		}
		m.events = append(m.events, Event{Time: e.Time, Kind: kind, User: e.User,
			Text: strings.TrimSpace(e.Op+" "+e.Target) + " (" + e.Via + ")"})
		if len(m.events) > maxEvents {
			m.events = m.events[len(m.events)-maxEvents:]
		}
	}
}

// apply hands an edit to lbd's handler and records who made it and how it
// went, in the log, the audit view and the events.
func (m *monitor) apply(ctx context.Context, ses session, req api.Request) api.Response {
	req.Version = api.Version
	resp := m.h.Handle(api.WithAuthor(ctx, api.Author{User: ses.user, Via: api.ViaConsole}), req)
	result := "ok"
	if resp.Error != "" {
		result = "refused: " + resp.Error
	}
	m.recordAudit(ses, req, result)
	fields := []zap.Field{zap.String("user", ses.user), zap.String("op", req.Op), zap.String("target", target(req)), zap.String("result", result)}
	if resp.Error != "" {
		m.log.Warn("console edit refused", fields...)
		return resp
	}
	m.log.Info("console edit", fields...)
	m.mu.Lock()
	defer m.mu.Unlock()
	kind := "edit"
	if req.Op == api.OpReload {
		kind = "reload"
	}
	text := strings.TrimSpace(req.Op + " " + target(req))
	if len(resp.Restart) > 0 {
		text += " (need a restart: " + strings.Join(resp.Restart, ", ") + ")"
	}
	m.event(kind, ses.user, "%s", text)
	return resp
}

func drainKey(svc api.ServiceSpec, srv api.ServerSpec) string {
	port := srv.Port
	if port == 0 {
		port = svc.Port
	}
	return fmt.Sprintf("%s %s:%d -> %s:%d", strings.ToUpper(svc.Protocol), svc.VIP, svc.Port, srv.Address, port)
}

func (m *monitor) startDrain(ses session, svc api.ServiceSpec, srv api.ServerSpec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := drainKey(svc, srv)
	m.drains[k] = drain{user: ses.user, svc: svc, srv: srv}
	m.event("drain", ses.user, "draining %s: weight 0, removed when its active connections are gone", k)
}

func (m *monitor) draining() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.drains))
	for k := range m.drains {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkDrains removes the drained servers that have no active connection
// left, and forgets drains whose server is gone or got a weight again.
func (m *monitor) checkDrains(ctx context.Context) {
	m.mu.Lock()
	var done []drain
	for k, d := range m.drains {
		rs, ok := m.findServer(k)
		switch {
		case !ok:
			delete(m.drains, k)
		case rs.Weight != 0:
			delete(m.drains, k)
			m.event("drain", d.user, "drain of %s cancelled: its weight is %d again", k, rs.Weight)
		case rs.ActiveConns == 0:
			delete(m.drains, k)
			done = append(done, d)
		}
	}
	m.mu.Unlock()
	for _, d := range done {
		srv := api.ServerSpec{Address: d.srv.Address, Port: d.srv.Port}
		svc := d.svc
		m.apply(ctx, session{user: d.user, role: "admin"}, api.Request{Op: api.OpDeleteServer, Service: &svc, Server: &srv})
	}
}

// findServer finds a server by its drain key in the last listing.
func (m *monitor) findServer(key string) (api.RealServer, bool) {
	for _, s := range m.last.Services {
		for _, rs := range s.Servers {
			if serverKey(s, rs) == key {
				return rs, true
			}
		}
	}
	return api.RealServer{}, false
}

func (m *monitor) eventList() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.events)
	slices.Reverse(out)
	// Newest first: lbd's edits by others come in at the next sample,
	// after the console's own that may be newer.
	slices.SortStableFunc(out, func(a, b Event) int { return b.Time.Compare(a.Time) })
	if out == nil {
		out = []Event{}
	}
	return out
}

func (m *monitor) auditList() []AuditEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.audit)
	slices.Reverse(out)
	slices.SortStableFunc(out, func(a, b AuditEntry) int { return b.Time.Compare(a.Time) })
	if out == nil {
		out = []AuditEntry{}
	}
	return out
}
