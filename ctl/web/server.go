// Package web is lbd's browser console: live tables and charts of the
// services, real servers and lcores, the connection listing, events and an
// audit log, and the edits lbctl makes, over HTTPS after a login.
//
// The console has no state of its own about the services: every read and
// every edit is an api.Request handed to the same handler that serves
// lbctl (ctl.Ops), so the page shows what lbctl -L shows and an edit is
// validated and applied, all or nothing, exactly as lbctl's is.
package web

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
)

// Handler executes one request as lbd's control socket does.
type Handler interface {
	Handle(ctx context.Context, req api.Request) api.Response
}

//go:embed static
var staticFS embed.FS

// Options configure a Server.
type Options struct {
	Users           []conf.WebUser
	SessionLifetime time.Duration // default 8h
	Log             *zap.Logger   // default no logging
	SamplePeriod    time.Duration // how often the charts are sampled; default 1s
	LoginFailures   int           // failed logins from one address before it must wait; default 5
	LoginWindow     time.Duration // how long a failure counts; default 1m
	// ClientCerts: a verified client certificate whose common name is a
	// user logs in as that user (the TLS server verifies the chain).
	ClientCerts bool
	Now         func() time.Time
}

// Server is the console's HTTP handler. It expects to be served over TLS
// (its cookies are Secure; Console does that).
type Server struct {
	h           Handler
	log         *zap.Logger
	clientCerts bool
	accounts    map[string]account
	sessions    *sessions
	limiter     *loginLimiter
	mon         *monitor
	period      time.Duration
	static      fs.FS
	login       *template.Template
	mux         *http.ServeMux
}

// sessionCookie: __Host- makes browsers insist on Secure, Path=/ and no Domain.
const sessionCookie = "__Host-dplb-session"

// New returns the console over h.
func New(h Handler, o Options) (*Server, error) {
	if o.SessionLifetime == 0 {
		o.SessionLifetime = 8 * time.Hour
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.SamplePeriod == 0 {
		o.SamplePeriod = time.Second
	}
	if o.LoginFailures == 0 {
		o.LoginFailures = 5
	}
	if o.LoginWindow == 0 {
		o.LoginWindow = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	acc, err := accounts(o.Users)
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	login, err := template.ParseFS(static, "login.html")
	if err != nil {
		return nil, err
	}
	s := &Server{
		h: h, log: o.Log, clientCerts: o.ClientCerts, accounts: acc, period: o.SamplePeriod, static: static, login: login,
		sessions: &sessions{byToken: map[string]*session{}, lifetime: o.SessionLifetime, now: o.Now},
		limiter:  &loginLimiter{fails: map[string][]time.Time{}, max: o.LoginFailures, window: o.LoginWindow, now: o.Now},
		mon:      newMonitor(h, o.Log),
	}
	s.routes()
	return s, nil
}

// Run samples lbd's listing for the charts and events until ctx ends.
func (s *Server) Run(ctx context.Context) {
	s.mon.run(ctx, s.period, func() {
		s.sessions.sweep()
		s.limiter.sweep()
	})
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.loginPost)
	m.HandleFunc("POST /logout", s.logout)
	files := http.StripPrefix("/static/", http.FileServerFS(s.static))
	m.Handle("GET /static/app.css", files) // the login page's style
	m.HandleFunc("GET /{$}", s.page(s.index))
	m.Handle("GET /static/", s.page(func(w http.ResponseWriter, r *http.Request, _ session) { files.ServeHTTP(w, r) }))
	m.HandleFunc("GET /api/session", s.api(s.sessionInfo))
	m.HandleFunc("GET /api/list", s.api(s.list))
	m.HandleFunc("GET /api/series", s.api(s.series))
	m.HandleFunc("GET /api/connections", s.api(s.connections))
	m.HandleFunc("GET /api/events", s.api(s.events))
	m.HandleFunc("GET /api/audit", s.api(s.auditLog))
	m.HandleFunc("POST /api/edit", s.api(s.edit))
	m.HandleFunc("POST /api/drain", s.api(s.drain))
	m.HandleFunc("/api/", s.api(func(w http.ResponseWriter, r *http.Request, _ session) {
		writeError(w, http.StatusNotFound, "no such API: "+r.Method+" "+r.URL.Path)
	}))
	m.HandleFunc("/", s.page(func(w http.ResponseWriter, r *http.Request, _ session) { http.NotFound(w, r) }))
	s.mux = m
}

// ServeHTTP adds the security headers and refuses cross-site posts, then
// routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Strict-Transport-Security", "max-age=31536000")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: with no-referrer browsers send
	// "Origin: null" on form posts, which sameOrigin must refuse.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
		writeError(w, http.StatusForbidden, "cross-origin request refused")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// sameOrigin: a browser names the page a post comes from; it must be ours.
// (Clients that send neither header are not browsers and get no ambient
// cookie from one.)
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "https://"+r.Host {
		return false
	}
	return true
}

// session returns the request's live session.
func (s *Server) session(r *http.Request) (session, string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, "", false
	}
	ses, ok := s.sessions.get(c.Value)
	return ses, c.Value, ok
}

// page wraps a handler of a page: without a session, the login page.
func (s *Server) page(f func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ses, _, ok := s.session(r)
		if !ok {
			if ses, ok = s.certSession(w, r); !ok {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
		}
		f(w, r, ses)
	}
}

// api wraps a handler of the JSON API: without a session, 401.
func (s *Server) api(f func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ses, _, ok := s.session(r)
		if !ok {
			if ses, ok = s.certSession(w, r); !ok {
				writeError(w, http.StatusUnauthorized, "not logged in (or the session expired)")
				return
			}
		}
		f(w, r, ses)
	}
}

func (s *Server) index(w http.ResponseWriter, r *http.Request, _ session) {
	http.ServeFileFS(w, r, s.static, "index.html")
}

// clientAddr is the address logins are counted against.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
