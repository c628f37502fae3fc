package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"github.com/dplb/dplb/ctl/web"
	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

var screenshots = flag.String("screenshots", "", "TestWebConsole: write PNG screenshots of the console's views into this directory")

// chromiumPath finds Debian's chromium (scripts/setup.sh installs it).
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("browser test: chromium is not installed (apt-get install chromium; make test installs it)")
	return ""
}

// consoleProxy forwards a loopback port of the test's own namespace to the
// console, which listens on loopback inside the LB namespace: chromium runs
// beside the test, where chromedp reaches its DevTools port.
func consoleProxy(t *testing.T, ns, target string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go harness.Forward(ln, ns, target)
	return ln.Addr().String()
}

func evalJS[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// consoleBrowser is headless Chromium on lbd's console (listening on
// 127.0.0.1:9443 in the LB namespace, with a self-signed certificate in
// its tls_dir), trusting exactly that certificate's key.
type consoleBrowser struct {
	t    *testing.T
	ctx  context.Context // chromedp's, for the whole test
	base string          // the console's URL, through consoleProxy
	cert *x509.Certificate
}

// openConsole starts Chromium on the console that lbd in ns serves with
// the certificate it generated in tlsDir; it skips the test when Debian's
// chromium is not installed.
func openConsole(t *testing.T, ctx context.Context, ns, tlsDir string) *consoleBrowser {
	browser := chromiumPath(t)
	pemData, err := os.ReadFile(filepath.Join(tlsDir, "console.crt"))
	if err != nil {
		t.Fatalf("self-signed certificate: %v", err)
	}
	blk, _ := pem.Decode(pemData)
	if blk == nil {
		t.Fatalf("no PEM block in %s/console.crt", tlsDir)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	b := &consoleBrowser{t: t, base: "https://" + consoleProxy(t, ns, "127.0.0.1:9443"), cert: cert}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(browser), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 900),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		// Trust exactly lbd's self-signed key, nothing else.
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])),
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b.ctx = bctx
	return b
}

// do runs steps, and on failure stops the test with the page as it was.
func (b *consoleBrowser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 40*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		dctx, dcancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer dcancel()
		loc, _ := chromedp.Run(dctx, chromedp.Location())
		html, _ := chromedp.Run(dctx, chromedp.OuterHTML(chromedp.CSS("body")))
		b.t.Fatalf("%s: %v\nthe page (%s):\n%s", what, err, loc, html)
	}
}

// poll waits up to 30 s for js to be true in the page.
func (b *consoleBrowser) poll(what, js string) {
	b.t.Helper()
	b.do(what, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
}

// login logs user in and waits for the service table.
func (b *consoleBrowser) login(user, pw string) {
	b.t.Helper()
	b.do("log in as "+user, chromedp.Navigate(b.base+"/login"), chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SetValue(chromedp.CSS("#user"), user), chromedp.SetValue(chromedp.CSS("#password"), pw),
		chromedp.Click(chromedp.CSS("#login-submit")), chromedp.WaitVisible(chromedp.CSS("#services tr.rs")))
}

// consoleWeb is the web section that has lbd serve the console on
// 127.0.0.1:9443 with a certificate it makes in tlsDir, for users given
// as name, role and password.
func consoleWeb(t *testing.T, tlsDir string, users ...[3]string) string {
	w := fmt.Sprintf("  listen: 127.0.0.1:9443\n  tls_dir: %s\n  session_lifetime: 10m\n  users:\n", tlsDir)
	for _, u := range users {
		h, err := bcrypt.GenerateFromPassword([]byte(u[2]), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		w += fmt.Sprintf("    - {name: %s, role: %s, password_hash: %q}\n", u[0], u[1], h)
	}
	return w
}

// TestWebConsole drives the console in headless Chromium against lbd on
// the VS/NAT topology while clients keep sending requests: the login page
// first, the service table with each server's last probe and its age and
// its feedback weight and a SNAT rule after the services, a chart that grows with the traffic, drops by
// reason, the connections, a weight changed in the page that lbctl then
// shows, lbd's refusal shown as is, a server added, seen down and
// drained, a reload, an lbctl edit and a SIGHUP reload with their
// authors, nothing blocked by the CSP, a viewer refused an edit, and
// logout.
func TestWebConsole(t *testing.T) {
	var tlsDir string
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		tlsDir = filepath.Join(filepath.Dir(c.Socket), "web")
		// Health, its events, and a slow start in the page.
		c.Services[0].Health = "{type: tcp, via: lbd, interval: 500ms, timeout: 400ms, slow_start: 2m}"
		// Dynamic feedback from a command run by lbd (no traffic): a load
		// of 0 keeps the configured weights, which the test edits.
		c.Services[0].Feedback = "{type: exec, command: [/bin/echo, '0'], interval: 1s, timeout: 500ms}"
		c.Web = consoleWeb(t, tlsDir, [3]string{"alice", "admin", "alice-secret"}, [3]string{"bob", "viewer", "bob-secret"})
		// A SNAT rule, listed after the services.
		c.Extra += "snat:\n  - {source: 198.51.100.0/24, addresses: [" + snatAddr + "], protocols: [tcp]}\n"
	}})
	e.warmUp(t)
	b := openConsole(t, e.ctx, e.nat.LBNS, tlsDir)
	bctx, base, do, poll, login := b.ctx, b.base, b.do, b.poll, b.login

	// The self-signed certificate lbd generated, and the fingerprint it logged.
	if fp := web.Fingerprint(b.cert.Raw); !strings.Contains(e.log.String(), fp) {
		t.Errorf("lbd did not log the certificate's fingerprint %s", fp)
	}

	// Clients keep connecting until the test ends.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, _ := harness.Get(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, e.url, 5, 5*time.Second)
			sent.Add(int64(len(res)))
			time.Sleep(100 * time.Millisecond)
		}
	})
	var once sync.Once
	stopTraffic := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer stopTraffic()

	// clickRow clicks a button in a row of a table the page re-renders on
	// every refresh: found and clicked in one script, so a refresh between
	// chromedp's lookup and its click cannot detach the node.
	clickRow := func(what, sel string) {
		t.Helper()
		poll(what, `(() => { const b = document.querySelector('`+sel+`'); if (!b) return false; b.click(); return true })()`)
	}
	shot := func(name string) {
		t.Helper()
		if *screenshots == "" {
			return
		}
		time.Sleep(1500 * time.Millisecond) // a refresh or two, for fuller charts
		png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(*screenshots, "console-"+name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vip := e.nat.VIP.String()
	rs1 := e.nat.Servers[0].Addr.Addr().String()
	rs1Row := fmt.Sprintf(`tr[data-server="TCP %s:80 -> %s:8080"]`, vip, rs1)

	// Nothing but the login page without a session; a wrong password is refused.
	do("open the console", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#login-form")))
	if loc, _ := chromedp.Run(bctx, chromedp.Location()); !strings.HasSuffix(loc, "/login") {
		t.Errorf("unauthenticated / went to %s, want /login", loc)
	}
	do("wrong password", chromedp.SetValue(chromedp.CSS("#user"), "alice"), chromedp.SetValue(chromedp.CSS("#password"), "guess"),
		chromedp.Click(chromedp.CSS("#login-submit")), chromedp.WaitVisible(chromedp.CSS("#login-error")))
	shot("login")

	// The admin sees the service table as lbctl lists it.
	login("alice", "alice-secret")
	if n := evalJS[int](t, bctx, `document.querySelectorAll("#services tr.rs").length`); n != 2 {
		t.Errorf("service table has %d server rows, want 2", n)
	}
	poll("both servers up, weight 1", `document.querySelectorAll("#services tr.rs .badge.up").length === 2 && document.querySelector('`+rs1Row+` td[data-col=weight]').textContent === "1"`)
	snatRow := `document.querySelector('#services tr.snat[data-snat="SNAT TCP 198.51.100.0/24"]')`
	poll("the SNAT rule after the services", snatRow+` !== null && `+snatRow+`.textContent.includes("from `+snatAddr+`")`)

	// The last health probe and its age, as lbctl -o json has them.
	probeJS := `document.querySelector('` + rs1Row + ` td[data-col=probe] .probe.passed')`
	poll("the last probe and its age", probeJS+` !== null && `+probeJS+`.textContent.includes("s ago") && Number(`+probeJS+`.dataset.age) < 30`)
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range resp.Services[0].Servers {
		if p := rs.Probe; p == nil || !p.Passed || p.AgeSecs < 0 || p.AgeSecs > 30 || p.PassedTotal == 0 {
			t.Errorf("lbctl -o json: %s's last probe %+v", rs.Address, p)
		}
	}
	poll("the feedback weight", `document.querySelector('`+rs1Row+` td[data-col=dynamic]').textContent === "feedback 1 of 1 (load 0%)"`)

	// A service removed while a connection to it lasts: its VIP drains,
	// and the summary says so, as lbctl -L does.
	const gone = "192.0.2.150"
	e.lbctlOK(t, "-A", "-t", gone+":8080", "-s", "rr")
	e.lbctlOK(t, "-a", "-t", gone+":8080", "-r", rs1+":8080", "-m")
	var held net.Conn
	if err := topo.InNS(e.nat.Client.NS, func() (err error) {
		held, err = net.DialTimeout("tcp4", gone+":8080", 5*time.Second)
		return err
	}); err != nil {
		t.Fatalf("connect to %s:8080: %v", gone, err)
	}
	defer held.Close()
	e.lbctlOK(t, "-D", "-t", gone+":8080")
	poll("the summary names the draining VIP", `document.getElementById("summary").textContent.includes("VIP draining: `+gone+`;")`)

	// A chart whose numbers grow with the traffic.
	do("charts", chromedp.Click(chromedp.CSS(`#tabs button[data-tab=charts]`)), chromedp.WaitVisible(chromedp.CSS(`#latest-total b[data-metric=conns_total]`)))
	first := evalJS[float64](t, bctx, `Number(document.querySelector("#latest-total b[data-metric=conns_total]").dataset.value)`)
	poll("connections since start grow", fmt.Sprintf(`Number(document.querySelector("#latest-total b[data-metric=conns_total]").dataset.value) > %v`, first+5))
	poll("new connections per second shown", `Number(document.querySelector("#latest-cps b[data-metric=conns_per_s]").dataset.value) > 0`)
	if n := evalJS[int](t, bctx, `document.querySelectorAll("#charts canvas").length`); n < 5 {
		t.Errorf("%d chart canvases, want at least 5", n)
	}
	shown := evalJS[float64](t, bctx, `Number(document.querySelector("#latest-total b[data-metric=conns_total]").dataset.value)`)
	resp, err = harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, s := range resp.Services {
		total += s.Stats.Conns
	}
	if shown <= first || shown > float64(total) {
		t.Errorf("the chart shows %v connections (first %v); lbctl counts %d since", shown, first, total)
	}
	t.Logf("chart: %v -> %v connections; lbctl %d; %d requests sent", first, shown, total, sent.Load())
	shot("charts")

	// Connections to a port of the VIP that is no service are dropped as
	// no_service: the lcores' table and a chart show drops by reason.
	harness.Get(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, "http://"+net.JoinHostPort(vip, "81")+"/", 2, time.Second)
	do("lcores", chromedp.Click(chromedp.CSS(`#tabs button[data-tab=lcores]`)), chromedp.WaitVisible(chromedp.CSS(`#lcores tbody tr`)))
	poll("drops by reason in the table", `Array.from(document.querySelectorAll("#lcores td[data-col=drops-by-reason]")).some(td => td.textContent.includes("no_service"))`)
	poll("drops by reason charted", `document.querySelector('[data-chart="lc-drops-by-reason"] b[data-metric=drops_per_s_no_service]') !== null`)
	shot("lcores")
	if *screenshots != "" {
		do("scroll to the drops", chromedp.ScrollIntoView(chromedp.CSS(`[data-chart="lc-drops-by-reason"]`)))
		shot("drops")
	}

	// The lbctl -L -c view, for the client.
	do("connections", chromedp.Click(chromedp.CSS(`#tabs button[data-tab=conns]`)),
		chromedp.SetValue(chromedp.CSS("#conn-client"), e.nat.Client.Addr.Addr().String()),
		chromedp.Click(chromedp.CSS(`#conn-form button[type=submit]`)))
	poll("the client's connections listed", `document.querySelectorAll("#conns tbody tr").length > 0`)
	shot("connections")

	// A weight changed in the page is what lbctl shows.
	before, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-S", "-n")
	if err != nil {
		t.Fatal(err)
	}
	do("services tab", chromedp.Click(chromedp.CSS(`#tabs button[data-tab=services]`)), chromedp.WaitVisible(chromedp.CSS(rs1Row)))
	clickRow("edit rs1", rs1Row+" button")
	do("edit weight", chromedp.SetValue(chromedp.CSS("#es-weight"), "3"), chromedp.Click(chromedp.CSS("#es-submit")))
	poll("edit done", `document.querySelector("#msg").className === "msg" && document.querySelector("#msg").textContent.startsWith("Done")`)
	out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`-> ` + regexp.QuoteMeta(rs1) + `:8080\s+Masq\s+3\s`).MatchString(out) {
		t.Errorf("lbctl -L -n after the console set weight 3:\n%s", out)
	}
	poll("the table shows weight 3", `document.querySelector('`+rs1Row+` td[data-col=weight]').textContent === "3"`)

	// lbd's refusal is shown as is, and changes nothing.
	afterEdit, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-S", "-n")
	if err != nil {
		t.Fatal(err)
	}
	if afterEdit == before {
		t.Errorf("lbctl -S -n did not change with the edit")
	}
	do("edit a server that does not exist", chromedp.SetValue(chromedp.CSS("#es-server"), "198.51.100.250:8080"),
		chromedp.SetValue(chromedp.CSS("#es-weight"), "2"), chromedp.Click(chromedp.CSS("#es-submit")))
	poll("refusal shown", `document.querySelector("#msg").className === "msg err"`)
	if msg := evalJS[string](t, bctx, `document.querySelector("#msg").textContent`); !strings.Contains(msg, "server does not exist") {
		t.Errorf("refusal in the page: %q", msg)
	}
	if now, _ := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-S", "-n"); now != afterEdit {
		t.Errorf("a refused edit changed the rules:\n%s\nwas\n%s", now, afterEdit)
	}

	// A server added in the page that nothing answers for goes down (an
	// event with the reason); drained, the console removes it.
	rs3 := "198.51.100.13"
	rs3Row := fmt.Sprintf(`tr[data-server="TCP %s:80 -> %s:8080"]`, vip, rs3)
	do("add a server", chromedp.SetValue(chromedp.CSS("#as-address"), rs3), chromedp.SetValue(chromedp.CSS("#as-port"), "8080"),
		chromedp.SetValue(chromedp.CSS("#as-weight"), "0"), chromedp.Click(chromedp.CSS(`#add-server button[type=submit]`)))
	poll("server added", `document.querySelector("#msg").className === "msg" && document.querySelector("#msg").textContent.includes("add-server")`)
	if out, _ := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n"); !strings.Contains(out, rs3+":8080") {
		t.Errorf("lbctl -L -n does not list the server added in the page:\n%s", out)
	}
	do("events", chromedp.Click(chromedp.CSS(`#tabs button[data-tab=events]`)))
	poll("the new server is down", `document.querySelector("#events tbody").textContent.includes("`+rs3+`:8080 is down")`)
	do("services tab again", chromedp.Click(chromedp.CSS(`#tabs button[data-tab=services]`)), chromedp.WaitVisible(chromedp.CSS(rs3Row)))
	clickRow("drain", rs3Row+" button:nth-of-type(3)")
	poll("drained server removed", `document.querySelector('`+rs3Row+`') === null`)
	if out, _ := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n"); strings.Contains(out, rs3+":8080") {
		t.Errorf("lbctl -L -n still lists the drained server:\n%s", out)
	}

	// A server that comes up after a failure ramps its weight (slow
	// start): rs2 on a port where nothing listens goes down, then a
	// listener there brings it up.
	rs2 := e.nat.Servers[1]
	rampRow := fmt.Sprintf(`tr[data-server="TCP %s:80 -> %s:8082"]`, vip, rs2.Addr.Addr())
	do("add a server that is not listening yet", chromedp.SetValue(chromedp.CSS("#as-address"), rs2.Addr.Addr().String()),
		chromedp.SetValue(chromedp.CSS("#as-port"), "8082"), chromedp.SetValue(chromedp.CSS("#as-weight"), "20"),
		chromedp.Click(chromedp.CSS(`#add-server button[type=submit]`)))
	poll("the server on 8082 is down", `document.querySelector('`+rampRow+` .badge.down') !== null`)
	var listenOut harness.Buffer
	listener, err := e.topo.Start(rs2.NS, &listenOut, e.nshelper, "serve", "-listen", ":8082", "-name", rs2.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Signal(syscall.SIGKILL)
	poll("the server on 8082 ramps up", `(() => { const r = document.querySelector('`+rampRow+` td[data-col=dynamic] [data-ramp]');
		return r !== null && r.textContent.includes("→ 20") && Number(document.querySelector('`+rampRow+` td[data-col=weight]').textContent) < 20; })()`)
	evalJS[bool](t, bctx, `window.scrollTo(0, 0) === undefined`) // the form scrolled the page sideways
	shot("services")

	// Reload from the page: lbd re-reads its file, where rs1 has weight 1
	// and the server on 8082 is not.
	do("reload", chromedp.Click(chromedp.CSS("#reload")))
	poll("reloaded", `document.querySelector("#msg").className === "msg" && document.querySelector("#msg").textContent.startsWith("Done: reload")`)
	poll("the table shows weight 1 again", `document.querySelector('`+rs1Row+` td[data-col=weight]').textContent === "1"`)
	afterReload, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-S", "-n")
	if err != nil {
		t.Fatal(err)
	}
	if afterReload != before {
		t.Errorf("lbctl -S -n after the reload:\n%s\nwant the file's rules\n%s", afterReload, before)
	}
	// A client list lbctl adds shows in its service's row, counted, its
	// entries in the cell's title.
	e.lbctlOK(t, "--add-blklst", "-t", vip+":80", "-k", "198.18.0.0/15")
	poll("the blocklist in the service row", `Array.from(document.querySelectorAll("#services tr.svc td.text")).some(td => td.textContent.includes("blocklist 1") && td.title === "blocklist: 198.18.0.0/15")`)
	e.lbctlOK(t, "--del-blklst", "-t", vip+":80", "-k", "198.18.0.0/15")
	poll("the blocklist gone from the row", `!Array.from(document.querySelectorAll("#services tr.svc td.text")).some(td => td.textContent.includes("blocklist"))`)
	// An edit with lbctl and a reload by SIGHUP are events with their
	// authors: the Unix user lbctl ran as, and the signal.
	e.lbctlOK(t, "-e", "-t", vip+":80", "-r", rs1+":8080", "-w", "1")
	if err := e.lbd.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	lbctlUser := "uid " + strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		lbctlUser = u.Username
	}
	do("events of others", chromedp.Click(chromedp.CSS(`#tabs button[data-tab=events]`)))
	poll("lbctl's edit and the signal's reload with their authors", `(() => { const rows = Array.from(document.querySelectorAll("#events tbody tr")).map(r => r.textContent);
		return rows.some(r => r.includes("`+lbctlUser+`") && r.includes("edit-server") && r.includes("(lbctl)")) && rows.some(r => r.includes("signal") && r.includes("reload (signal)")); })()`)
	shot("events")
	if v := evalJS[string](t, bctx, `JSON.stringify(window.cspViolations)`); v != "[]" {
		t.Errorf("the content security policy blocked: %s", v)
	}

	do("audit", chromedp.Click(chromedp.CSS(`#tabs button[data-tab=audit]`)))
	poll("audit lists alice's edits, lbctl's and the signal's", `document.querySelector("#audit tbody").textContent.includes("alice") && document.querySelectorAll("#audit tbody tr").length >= 8 &&
		document.querySelector("#audit tbody").textContent.includes("`+lbctlUser+`lbctl")`)
	if got := evalJS[string](t, bctx, `document.querySelector("#audit tbody").textContent`); !strings.Contains(got, "delete-server") || !strings.Contains(got, "refused: ") {
		t.Errorf("audit view: %s", got)
	}
	shot("audit")

	// Logged out, the session is refused.
	do("log out", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#login-form")))
	if code := evalJS[int](t, bctx, `fetch("/api/list").then(r => r.status)`); code != 401 {
		t.Errorf("API after logout: %d, want 401", code)
	}
	do("reopen after logout", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#login-form")))

	// A viewer sees the table but cannot edit.
	login("bob", "bob-secret")
	if shown := evalJS[bool](t, bctx, `document.querySelector("#edit-server").offsetParent !== null`); shown {
		t.Errorf("the viewer sees the edit form")
	}
	evalJS[bool](t, bctx, fmt.Sprintf(`post("/api/edit", {op: "edit-server", service: {protocol: "tcp", vip: %q, port: 80}, server: {address: %q, port: 8080, weight: 9}})`, vip, rs1))
	poll("viewer refused", `document.querySelector("#msg").className === "msg err" && document.querySelector("#msg").textContent.includes("may not edit")`)
	if now, _ := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-S", "-n"); now != afterReload {
		t.Errorf("a viewer's edit changed the rules:\n%s\nwas\n%s", now, afterReload)
	}
	stopTraffic()
	e.stopLBD(t)
}
