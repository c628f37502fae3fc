package web

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
)

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // served as JSON, never as HTML (nosniff)
	enc.Encode(v)
}

// writeError answers {"error": msg}: what the page shows the operator.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

type loginData struct{ Error string }

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := s.session(r); ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.renderLogin(w, http.StatusOK, "")
}

func (s *Server) renderLogin(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	s.login.Execute(w, loginData{Error: msg})
}

func (s *Server) loginPost(w http.ResponseWriter, r *http.Request) {
	addr := clientAddr(r)
	if wait := s.limiter.wait(addr); wait > 0 {
		s.log.Warn("console: login refused, too many failures", zap.String("from", addr))
		s.renderLogin(w, http.StatusTooManyRequests, fmt.Sprintf("Too many failed logins: try again in %d s.", int(wait.Seconds())+1))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	user, pw := r.PostFormValue("user"), r.PostFormValue("password")
	acc, known := s.accounts[user]
	hash := acc.hash
	if !known {
		hash = dummyHash
	}
	if !verifyPassword(hash, pw) || !known {
		s.limiter.failed(addr)
		s.log.Warn("console: login failed", zap.String("user", user), zap.String("from", addr))
		s.renderLogin(w, http.StatusUnauthorized, "Wrong user name or password.")
		return
	}
	s.limiter.succeeded(addr)
	s.startSession(w, user, acc.role)
	s.log.Info("console: login", zap.String("user", user), zap.String("role", acc.role), zap.String("from", addr))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// startSession creates a session and gives the browser its cookie.
func (s *Server) startSession(w http.ResponseWriter, user, role string) session {
	tok, ses := s.sessions.create(user, role)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: tok, Path: "/", Secure: true, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Expires: ses.expires, MaxAge: int(s.sessions.lifetime / time.Second)})
	return *ses
}

// certSession logs in the user that a verified client certificate names
// (web.client_ca_file), as a password login would.
func (s *Server) certSession(w http.ResponseWriter, r *http.Request) (session, bool) {
	if !s.clientCerts || r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return session{}, false
	}
	user := r.TLS.VerifiedChains[0][0].Subject.CommonName
	acc, ok := s.accounts[user]
	if !ok {
		s.log.Warn("console: client certificate names no user", zap.String("cn", user), zap.String("from", clientAddr(r)))
		return session{}, false
	}
	s.log.Info("console: login by client certificate", zap.String("user", user), zap.String("role", acc.role), zap.String("from", clientAddr(r)))
	return s.startSession(w, user, acc.role), true
}

// checkCSRF: the token the page got from /api/session, in a header (fetch)
// or a form field.
func checkCSRF(r *http.Request, ses session) bool {
	tok := r.Header.Get("X-CSRF-Token")
	if tok == "" {
		tok = r.PostFormValue("csrf")
	}
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(ses.csrf)) == 1
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	ses, tok, ok := s.session(r)
	if ok {
		if !checkCSRF(r, ses) {
			writeError(w, http.StatusForbidden, "missing or wrong CSRF token")
			return
		}
		s.sessions.remove(tok)
		s.log.Info("console: logout", zap.String("user", ses.user))
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", Secure: true, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (s *Server) sessionInfo(w http.ResponseWriter, _ *http.Request, ses session) {
	writeJSON(w, http.StatusOK, map[string]any{"user": ses.user, "role": ses.role, "csrf": ses.csrf, "expires": ses.expires})
}

// list is lbctl -L -n --per-lcore's data, and the servers being drained.
func (s *Server) list(w http.ResponseWriter, r *http.Request, _ session) {
	resp := s.h.Handle(r.Context(), api.Request{Version: api.Version, Op: api.OpList})
	if resp.Error != "" {
		writeError(w, http.StatusBadGateway, resp.Error)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"list": resp, "draining": s.mon.draining(), "entities": s.mon.entityNames()})
}

func (s *Server) series(w http.ResponseWriter, r *http.Request, _ session) {
	q := r.URL.Query()
	entity, win := q.Get("entity"), q.Get("window")
	if entity == "" {
		entity = "total"
	}
	if win == "" {
		win = "10m"
	}
	ser, err := s.mon.series(entity, win)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ser)
}

// connections is lbctl -L -n -c [--client A] [-t|-u VIP:PORT].
func (s *Server) connections(w http.ResponseWriter, r *http.Request, _ session) {
	q := r.URL.Query()
	req := api.Request{Version: api.Version, Op: api.OpConnections, Client: strings.TrimSpace(q.Get("client"))}
	if svc := strings.TrimSpace(q.Get("service")); svc != "" {
		spec, err := parseService(svc)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		req.Service = &spec
	}
	resp := s.h.Handle(r.Context(), req)
	if resp.Error != "" {
		writeError(w, http.StatusBadRequest, resp.Error)
		return
	}
	if resp.Conns == nil {
		resp.Conns = []api.Conn{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"conns": resp.Conns, "truncated": resp.ConnsTruncated})
}

// parseService reads "tcp 192.0.2.1:80" or "TCP 192.0.2.1:80".
func parseService(s string) (api.ServiceSpec, error) {
	proto, addr, ok := strings.Cut(s, " ")
	host, port, err := splitHostPort(strings.TrimSpace(addr))
	proto = strings.ToLower(proto)
	if !ok || err != nil || (proto != "tcp" && proto != "udp") {
		return api.ServiceSpec{}, fmt.Errorf("service %q: want \"tcp VIP:PORT\" or \"udp VIP:PORT\"", s)
	}
	return api.ServiceSpec{Protocol: proto, VIP: host, Port: port}, nil
}

func splitHostPort(s string) (string, int, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("no port")
	}
	p, err := strconv.Atoi(s[i+1:])
	return s[:i], p, err
}

func (s *Server) events(w http.ResponseWriter, _ *http.Request, _ session) {
	writeJSON(w, http.StatusOK, s.mon.eventList())
}

func (s *Server) auditLog(w http.ResponseWriter, _ *http.Request, _ session) {
	writeJSON(w, http.StatusOK, s.mon.auditList())
}

// editOps are the requests the console may send; everything else lbctl
// can do stays with lbctl.
var editOps = map[string]bool{
	api.OpAddService: true, api.OpEditService: true, api.OpDeleteService: true,
	api.OpAddServer: true, api.OpEditServer: true, api.OpDeleteServer: true,
	api.OpReload: true, api.OpZero: true,
}

// mayEdit checks the CSRF token and the role; on refusal it has answered.
func (s *Server) mayEdit(w http.ResponseWriter, r *http.Request, ses session, req api.Request) bool {
	if !checkCSRF(r, ses) {
		writeError(w, http.StatusForbidden, "missing or wrong CSRF token: reload the page")
		return false
	}
	if ses.role != conf.RoleAdmin {
		s.mon.recordAudit(ses, req, "denied: "+ses.role)
		s.log.Warn("console: edit denied", zap.String("user", ses.user), zap.String("role", ses.role), zap.String("op", req.Op))
		writeError(w, http.StatusForbidden, "user "+ses.user+" is a "+ses.role+" and may not edit")
		return false
	}
	return true
}

// decodeRequest reads an api.Request (JSON, as lbctl sends it) from the body.
func decodeRequest(w http.ResponseWriter, r *http.Request) (api.Request, error) {
	var req api.Request
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return req, fmt.Errorf("want Content-Type application/json, not %q", ct)
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("request is not valid JSON: %v", err)
	}
	req.Version = api.Version
	return req, nil
}

// edit hands one edit to lbd's handler, as lbctl would, and answers its
// verdict: 200, or 400 with lbd's own message.
func (s *Server) edit(w http.ResponseWriter, r *http.Request, ses session) {
	req, err := decodeRequest(w, r)
	if !s.mayEdit(w, r, ses, req) {
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !editOps[req.Op] {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("op %q is not an edit the console makes", req.Op))
		return
	}
	resp := s.mon.apply(r.Context(), ses, req)
	if resp.Error != "" {
		writeError(w, http.StatusBadRequest, resp.Error)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "restart": resp.Restart})
}

// drain sets a server's weight to 0 and removes it once it has no active
// connection left.
func (s *Server) drain(w http.ResponseWriter, r *http.Request, ses session) {
	req, err := decodeRequest(w, r)
	if !s.mayEdit(w, r, ses, req) {
		return
	}
	if err == nil && (req.Service == nil || req.Server == nil) {
		err = fmt.Errorf("drain needs a service and a server")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	zero := 0
	srv := api.ServerSpec{Address: req.Server.Address, Port: req.Server.Port, Weight: &zero}
	resp := s.mon.apply(r.Context(), ses, api.Request{Version: api.Version, Op: api.OpEditServer, Service: req.Service, Server: &srv})
	if resp.Error != "" {
		writeError(w, http.StatusBadRequest, resp.Error)
		return
	}
	s.mon.startDrain(ses, *req.Service, *req.Server)
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}
