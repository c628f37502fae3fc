package web

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func argon2idHash(pw string) string {
	salt := []byte("0123456789abcdef")
	key := argon2.IDKey([]byte(pw), salt, 1, 8*1024, 1, 32)
	return "$argon2id$v=19$m=8192,t=1,p=1$" + base64.RawStdEncoding.EncodeToString(salt) + "$" + base64.RawStdEncoding.EncodeToString(key)
}

type env struct {
	t     *testing.T
	srv   *Server
	lbd   *fakeLBD
	ts    *httptest.Server
	clock *fakeClock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte("alice-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users := []conf.WebUser{
		{Name: "alice", Role: conf.RoleAdmin, PasswordHash: string(h)},
		{Name: "bob", Role: conf.RoleViewer, PasswordHash: argon2idHash("bob-pw")},
	}
	for _, u := range users {
		if !conf.IsPasswordHash(u.PasswordHash) {
			t.Fatalf("conf does not take the test's hash %q", u.PasswordHash)
		}
	}
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	lbd := newFake()
	srv, err := New(lbd, Options{Users: users, SessionLifetime: time.Hour, Now: clock.now, LoginFailures: 3, LoginWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewTLSServer(srv)
	t.Cleanup(ts.Close)
	return &env{t: t, srv: srv, lbd: lbd, ts: ts, clock: clock}
}

// browser is one cookie jar, redirects not followed.
type browser struct {
	e    *env
	c    *http.Client
	csrf string
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	c := e.ts.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{e: e, c: c}
}

func (b *browser) do(method, path, contentType, body string, hdr map[string]string) (*http.Response, string) {
	b.e.t.Helper()
	req, err := http.NewRequest(method, b.e.ts.URL+path, strings.NewReader(body))
	if err != nil {
		b.e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

func (b *browser) get(path string) (*http.Response, string) { return b.do("GET", path, "", "", nil) }

func (b *browser) login(user, pw string) *http.Response {
	b.e.t.Helper()
	form := url.Values{"user": {user}, "password": {pw}}.Encode()
	resp, _ := b.do("POST", "/login", "application/x-www-form-urlencoded", form, nil)
	if resp.StatusCode == http.StatusSeeOther {
		_, body := b.get("/api/session")
		var ses struct{ CSRF string }
		json.Unmarshal([]byte(body), &ses)
		b.csrf = ses.CSRF
	}
	return resp
}

// edit posts an api.Request as the page does, with the CSRF token.
func (b *browser) edit(path string, req any) (int, string) {
	b.e.t.Helper()
	body, _ := json.Marshal(req)
	resp, out := b.do("POST", path, "application/json", string(body), map[string]string{"X-CSRF-Token": b.csrf})
	return resp.StatusCode, out
}

func errorOf(body string) string {
	var e struct{ Error string }
	json.Unmarshal([]byte(body), &e)
	return e.Error
}

func intp(n int) *int { return &n }

func TestUnauthenticatedGetOnlyTheLoginPage(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	for _, path := range []string{"/", "/static/app.js", "/static/uplot/uPlot.iife.min.js", "/nope"} {
		resp, _ := b.get(path)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Errorf("GET %s: %d %q, want 303 to /login", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	for _, path := range []string{"/api/list", "/api/series", "/api/connections", "/api/events", "/api/audit", "/api/session"} {
		resp, body := b.get(path)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(errorOf(body), "not logged in") {
			t.Errorf("GET %s: %d %s, want 401", path, resp.StatusCode, body)
		}
	}
	code, body := b.edit("/api/edit", api.Request{Op: api.OpEditServer})
	if code != http.StatusUnauthorized {
		t.Errorf("POST /api/edit without a session: %d %s", code, body)
	}
	resp, body := b.get("/login")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<form method="post" action="/login"`) {
		t.Errorf("GET /login: %d\n%s", resp.StatusCode, body)
	}
	h := resp.Header
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q", csp)
	}
	if !strings.HasPrefix(h.Get("Strict-Transport-Security"), "max-age=") || h.Get("X-Frame-Options") != "DENY" {
		t.Errorf("security headers missing: %v", h)
	}
	if strings.Contains(body, "<script") || strings.Contains(body, "style=") {
		t.Errorf("the login page has inline script or style")
	}
	if resp, _ := b.get("/static/app.css"); resp.StatusCode != http.StatusOK {
		t.Errorf("the login page's stylesheet: %d", resp.StatusCode)
	}
	if len(e.lbd.edits()) != 0 {
		t.Errorf("requests reached lbd: %v", e.lbd.edits())
	}
}

func TestLogin(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	resp := b.login("alice", "wrong")
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong password: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	if resp := b.login("nobody", "alice-pw"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unknown user: %d", resp.StatusCode)
	}
	resp = b.login("alice", "alice-pw")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cs := resp.Cookies()
	if len(cs) != 1 || cs[0].Name != "__Host-dplb-session" || !cs[0].Secure || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || cs[0].Path != "/" {
		t.Fatalf("session cookie %+v", cs)
	}
	_, body := b.get("/api/session")
	if !strings.Contains(body, `"user":"alice"`) || !strings.Contains(body, `"role":"admin"`) || b.csrf == "" {
		t.Errorf("session: %s", body)
	}
	if resp, body := b.get("/"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `src="/static/app.js"`) {
		t.Errorf("GET / after login: %d", resp.StatusCode)
	}
	// argon2id
	v := e.browser()
	if resp := v.login("bob", "bob-pw"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("argon2id login: %d", resp.StatusCode)
	}
	if _, body := v.get("/api/session"); !strings.Contains(body, `"role":"viewer"`) {
		t.Errorf("viewer session: %s", body)
	}
}

func TestLoginRateLimited(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	for range 3 {
		if resp := b.login("alice", "guess"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failed login: %d", resp.StatusCode)
		}
	}
	// The right password does not help while the address must wait.
	resp, body := b.do("POST", "/login", "application/x-www-form-urlencoded", "user=alice&password=alice-pw", nil)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "Too many failed logins") || len(resp.Cookies()) != 0 {
		t.Fatalf("4th login: %d %s", resp.StatusCode, body)
	}
	e.clock.advance(61 * time.Second)
	e.srv.limiter.sweep()
	if n := len(e.srv.limiter.fails); n != 0 {
		t.Errorf("%d addresses remembered after their failures aged out", n)
	}
	if resp := b.login("alice", "alice-pw"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login after the window: %d", resp.StatusCode)
	}
}

func TestSessionExpires(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.login("alice", "alice-pw")
	if resp, _ := b.get("/api/list"); resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d", resp.StatusCode)
	}
	e.clock.advance(time.Hour)
	if resp, _ := b.get("/api/list"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("list after the session's lifetime: %d", resp.StatusCode)
	}
	if resp, _ := b.get("/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("page after the session's lifetime: %d", resp.StatusCode)
	}
}

func TestLogout(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.login("alice", "alice-pw")
	if resp, body := b.do("POST", "/logout", "application/x-www-form-urlencoded", "", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("logout without CSRF token: %d %s", resp.StatusCode, body)
	}
	resp, _ := b.do("POST", "/logout", "application/x-www-form-urlencoded", "csrf="+url.QueryEscape(b.csrf), nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if resp, _ := b.get("/api/list"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("list after logout: %d", resp.StatusCode)
	}
}

func TestEditNeedsCSRFToken(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.login("alice", "alice-pw")
	req := api.Request{Op: api.OpEditServer, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.10", Port: 80},
		Server: &api.ServerSpec{Address: "198.51.100.11", Port: 8080, Weight: intp(5)}}
	body, _ := json.Marshal(req)
	for _, tok := range []string{"", "wrong"} {
		resp, out := b.do("POST", "/api/edit", "application/json", string(body), map[string]string{"X-CSRF-Token": tok})
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(errorOf(out), "CSRF") {
			t.Errorf("token %q: %d %s, want 403", tok, resp.StatusCode, out)
		}
	}
	// Another site's page posting with the user's cookie.
	resp, out := b.do("POST", "/api/edit", "application/json", string(body), map[string]string{"X-CSRF-Token": b.csrf, "Origin": "https://evil.example"})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(errorOf(out), "cross-origin") {
		t.Errorf("cross-origin post: %d %s", resp.StatusCode, out)
	}
	if got := e.lbd.edits(); len(got) != 0 {
		t.Fatalf("edits reached lbd: %+v", got)
	}
}

func TestViewerMayNotEdit(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.login("bob", "bob-pw")
	for _, path := range []string{"/api/edit", "/api/drain"} {
		code, out := b.edit(path, api.Request{Op: api.OpEditServer, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.10", Port: 80},
			Server: &api.ServerSpec{Address: "198.51.100.11", Port: 8080, Weight: intp(0)}})
		if code != http.StatusForbidden || errorOf(out) != "user bob is a viewer and may not edit" {
			t.Errorf("viewer %s: %d %s, want 403", path, code, out)
		}
	}
	if got := e.lbd.edits(); len(got) != 0 {
		t.Fatalf("a viewer's edit reached lbd: %+v", got)
	}
	if _, body := b.get("/api/list"); !strings.Contains(body, `"weight":1`) || strings.Contains(body, `"weight":0`) {
		t.Errorf("weights changed: %s", body)
	}
	_, body := b.get("/api/audit")
	var audit []AuditEntry
	json.Unmarshal([]byte(body), &audit)
	if len(audit) != 2 || audit[0].User != "bob" || audit[0].Result != "denied: viewer" {
		t.Errorf("audit: %s", body)
	}
}

func TestEditGoesToLBDAsIs(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.login("alice", "alice-pw")
	svc := &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.10", Port: 80}
	req := api.Request{Op: api.OpEditServer, Service: svc, Server: &api.ServerSpec{Address: "198.51.100.11", Port: 8080, Weight: intp(7)}}
	if code, out := b.edit("/api/edit", req); code != http.StatusOK {
		t.Fatalf("edit: %d %s", code, out)
	}
	got := e.lbd.edits()
	if len(got) != 1 || got[0].Op != api.OpEditServer || *got[0].Server.Weight != 7 || got[0].Version != api.Version || got[0].Service.VIP != "192.0.2.10" {
		t.Fatalf("lbd got %+v", got)
	}
	_, body := b.get("/api/list")
	if !strings.Contains(body, `"weight":7`) {
		t.Errorf("list after the edit: %s", body)
	}
	_, body = b.get("/api/audit")
	if !strings.Contains(body, `"user":"alice"`) || !strings.Contains(body, `"result":"ok"`) || !strings.Contains(body, "weight 7") {
		t.Errorf("audit: %s", body)
	}
	_, body = b.get("/api/events")
	if !strings.Contains(body, `"kind":"edit"`) || !strings.Contains(body, `"user":"alice"`) {
		t.Errorf("events: %s", body)
	}
}

func TestEditBadInput(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.login("alice", "alice-pw")
	_, before := b.get("/api/list")
	svc := &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.10", Port: 80}
	for _, tc := range []struct {
		name, ctype, body, want string
	}{
		{"not JSON", "application/json", "{op:", "request is not valid JSON"},
		{"unknown field", "application/json", `{"op":"edit-server","wieght":3}`, `request is not valid JSON: json: unknown field "wieght"`},
		{"form post", "application/x-www-form-urlencoded", "op=clear", `want Content-Type application/json, not "application/x-www-form-urlencoded"`},
		{"op the console does not make", "application/json", `{"op":"clear"}`, `op "clear" is not an edit the console makes`},
		{"weight out of range (lbd's message)", "application/json", mustJSON(api.Request{Op: api.OpEditServer, Service: svc,
			Server: &api.ServerSpec{Address: "198.51.100.11", Port: 8080, Weight: intp(70000)}}), "-w 70000: weight is out of range 0..65535"},
		{"no such server (lbd's message)", "application/json", mustJSON(api.Request{Op: api.OpEditServer, Service: svc,
			Server: &api.ServerSpec{Address: "198.51.100.99", Port: 8080, Weight: intp(1)}}), "-e -t 192.0.2.10:80 -r 198.51.100.99:8080: server does not exist"},
	} {
		resp, out := b.do("POST", "/api/edit", tc.ctype, tc.body, map[string]string{"X-CSRF-Token": b.csrf})
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(errorOf(out), tc.want) {
			t.Errorf("%s: %d %s, want 400 %q", tc.name, resp.StatusCode, out, tc.want)
		}
	}
	if _, after := b.get("/api/list"); after != before {
		t.Errorf("refused edits changed the listing:\n%s\nwas\n%s", after, before)
	}
	_, body := b.get("/api/audit")
	if !strings.Contains(body, "refused: -w 70000: weight is out of range 0..65535") {
		t.Errorf("the refusal is not in the audit: %s", body)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestConnections(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.login("bob", "bob-pw") // reading is for viewers too
	resp, body := b.get("/api/connections?client=192.0.2.2&service=tcp+192.0.2.10:80")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"client":"192.0.2.2:40000"`) {
		t.Fatalf("connections: %d %s", resp.StatusCode, body)
	}
	got := e.lbd.edits()
	if len(got) != 1 || got[0].Op != api.OpConnections || got[0].Client != "192.0.2.2" || got[0].Service == nil || got[0].Service.Port != 80 {
		t.Errorf("lbd got %+v", got)
	}
	if resp, body := b.get("/api/connections?client=nope"); resp.StatusCode != http.StatusBadRequest || errorOf(body) != "--client nope: not an IPv4 address" {
		t.Errorf("bad client: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.get("/api/connections?service=sctp+x"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(errorOf(body), `want "tcp VIP:PORT"`) {
		t.Errorf("bad service: %d %s", resp.StatusCode, body)
	}
}

func TestReloadAndItsRestartList(t *testing.T) {
	e := newEnv(t)
	e.lbd.mu.Lock()
	e.lbd.restart = []string{"dataplane.workers"}
	e.lbd.mu.Unlock()
	b := e.browser()
	b.login("alice", "alice-pw")
	code, out := b.edit("/api/edit", api.Request{Op: api.OpReload})
	if code != http.StatusOK || !strings.Contains(out, `"restart":["dataplane.workers"]`) {
		t.Fatalf("reload: %d %s", code, out)
	}
	if got := e.lbd.edits(); len(got) != 1 || got[0].Op != api.OpReload {
		t.Errorf("lbd got %+v", got)
	}
	if _, body := b.get("/api/events"); !strings.Contains(body, `"kind":"reload"`) || !strings.Contains(body, "need a restart: dataplane.workers") {
		t.Errorf("events: %s", body)
	}
}
