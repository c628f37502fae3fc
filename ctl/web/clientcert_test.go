package web

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
)

// testCA makes a CA and returns its PEM and a function that issues client
// certificates for a common name.
func testCA(t *testing.T) ([]byte, func(cn string) tls.Certificate) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	issue := func(cn string) tls.Certificate {
		ck, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		ct := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		cder, err := x509.CreateCertificate(rand.Reader, ct, ca, &ck.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{cder}, PrivateKey: ck}
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), issue
}

// TestClientCertificateLogsIn: with web.client_ca_file, a certificate the
// CA signed for a user's name is that user's login; others get the form.
func TestClientCertificateLogsIn(t *testing.T) {
	caPEM, issue := testCA(t)
	_, otherIssue := testCA(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := conf.Default().Web
	cfg.Listen, cfg.TLSDir, cfg.ClientCAFile = "127.0.0.1:0", dir, caFile
	cfg.Users = []conf.WebUser{{Name: "carol", Role: conf.RoleViewer}} // certificate only
	c, err := Listen(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Serve(ctx, newFake())
	get := func(cert *tls.Certificate, path string) (*http.Response, error) {
		tc := &tls.Config{InsecureSkipVerify: true}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: tc},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		return cl.Get("https://" + c.Addr().String() + path)
	}
	carol := issue("carol")
	resp, err := get(&carol, "/api/session")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
		t.Fatalf("carol's certificate: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	mallory := issue("mallory")
	if resp, err := get(&mallory, "/"); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a certificate naming no user: %v %v, want the login page", resp, err)
	}
	if resp, err := get(nil, "/"); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Errorf("no certificate: %v %v, want the login page", resp, err)
	}
	forged := otherIssue("carol")
	if resp, err := get(&forged, "/api/session"); err == nil && resp.StatusCode == http.StatusOK {
		t.Errorf("a certificate from another CA logged in")
	}
	// A certificate-only user cannot log in with a password.
	resp, err = (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}).PostForm(
		"https://"+c.Addr().String()+"/login", map[string][]string{"user": {"carol"}, "password": {""}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("password login of a certificate-only user: %d", resp.StatusCode)
	}
	cfg.ClientCAFile = filepath.Join(dir, "missing.pem")
	if _, err := Listen(cfg, zap.NewNop()); err == nil || !strings.HasPrefix(err.Error(), "web.client_ca_file: ") {
		t.Errorf("missing CA file: %v", err)
	}
}
