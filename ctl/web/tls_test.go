package web

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"github.com/dplb/dplb/conf"
)

func TestSelfSignedGeneratedOnceThenReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "web")
	cert, generated, err := loadCertificate("", "", dir, "127.0.0.1:9443")
	if err != nil || !generated {
		t.Fatalf("first start: generated=%v err=%v", generated, err)
	}
	fi, err := os.Stat(filepath.Join(dir, selfKeyName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	again, generated, err := loadCertificate("", "", dir, "127.0.0.1:9443")
	if err != nil || generated || Fingerprint(again.Certificate[0]) != Fingerprint(cert.Certificate[0]) {
		t.Fatalf("second start: generated=%v err=%v, fingerprint changed", generated, err)
	}
	x, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := x.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("certificate does not name 127.0.0.1: %v", err)
	}
	if fp := Fingerprint(cert.Certificate[0]); len(fp) != 95 || strings.ToUpper(fp) != fp {
		t.Errorf("fingerprint %q", fp)
	}
	if _, _, err := loadCertificate(filepath.Join(dir, "missing.pem"), filepath.Join(dir, "missing.key"), "", ""); err == nil || !strings.HasPrefix(err.Error(), "web.cert_file: ") {
		t.Errorf("missing cert_file: %v", err)
	}
}

// TestConsoleServesHTTPSOnly runs the Console lbd runs: TLS with the
// certificate whose fingerprint it reports, and no plain HTTP.
func TestConsoleServesHTTPSOnly(t *testing.T) {
	h, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	cfg := conf.Default().Web
	cfg.Listen = "127.0.0.1:0"
	cfg.TLSDir = t.TempDir()
	cfg.Users = []conf.WebUser{{Name: "alice", Role: "admin", PasswordHash: string(h)}}
	c, err := Listen(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx, newFake()) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	}()
	conn, err := tls.Dial("tcp", c.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if fp := Fingerprint(conn.ConnectionState().PeerCertificates[0].Raw); fp != c.Fingerprint {
		t.Errorf("served certificate %s, logged %s", fp, c.Fingerprint)
	}
	conn.Close()
	// Plain HTTP gets no page.
	resp, err := (&http.Client{}).Get("http://" + c.Addr().String() + "/login")
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP served the login page")
		}
	}
}

func TestListenRefusals(t *testing.T) {
	cfg := conf.Default().Web
	cfg.Listen = "127.0.0.1:0"
	cfg.TLSDir = t.TempDir()
	cfg.UsersFile = filepath.Join(t.TempDir(), "missing")
	if _, err := Listen(cfg, zap.NewNop()); err == nil || !strings.HasPrefix(err.Error(), "web.users_file: ") {
		t.Errorf("missing users file: %v", err)
	}
	cfg.UsersFile = ""
	cfg.CertFile, cfg.KeyFile = filepath.Join(cfg.TLSDir, "none.crt"), filepath.Join(cfg.TLSDir, "none.key")
	if _, err := Listen(cfg, zap.NewNop()); err == nil || !strings.HasPrefix(err.Error(), "web.cert_file: ") {
		t.Errorf("missing certificate: %v", err)
	}
	cfg.CertFile, cfg.KeyFile = "", ""
	cfg.Listen = "192.0.2.1:1" // not an address of this host
	if _, err := Listen(cfg, zap.NewNop()); err == nil || !strings.HasPrefix(err.Error(), "web.listen: ") {
		t.Errorf("address not ours: %v", err)
	}
}
