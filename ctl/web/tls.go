package web

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Names of the self-signed certificate and key in tls_dir.
const (
	selfCertName = "console.crt"
	selfKeyName  = "console.key"
)

// loadCertificate loads certFile and keyFile, or without them the
// self-signed pair in dir, generating it on first use. generated says
// whether it was just made.
func loadCertificate(certFile, keyFile, dir, listen string) (cert tls.Certificate, generated bool, err error) {
	if certFile != "" {
		cert, err = tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return cert, false, fmt.Errorf("web.cert_file: %w", err)
		}
		return cert, false, nil
	}
	certPath, keyPath := filepath.Join(dir, selfCertName), filepath.Join(dir, selfKeyName)
	cert, err = tls.LoadX509KeyPair(certPath, keyPath)
	if err == nil {
		return cert, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return cert, false, fmt.Errorf("web.tls_dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return cert, false, fmt.Errorf("web.tls_dir: %w", err)
	}
	certPEM, keyPEM, err := selfSigned(listen, time.Now())
	if err != nil {
		return cert, false, err
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return cert, false, fmt.Errorf("web.tls_dir: %w", err)
	}
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		return cert, false, fmt.Errorf("web.tls_dir: %w", err)
	}
	cert, err = tls.X509KeyPair(certPEM, keyPEM)
	return cert, true, err
}

// selfSigned makes an ECDSA P-256 certificate for localhost, the loopback
// addresses and the listen host, valid for two years.
func selfSigned(listen string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "dplb lbd console", Organization: []string{"dplb"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(2 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if host, _, err := net.SplitHostPort(listen); err == nil && host != "" {
		if ip := net.ParseIP(host); ip != nil {
			if !ip.IsUnspecified() && !ip.IsLoopback() {
				tpl.IPAddresses = append(tpl.IPAddresses, ip)
			}
		} else if host != "localhost" {
			tpl.DNSNames = append(tpl.DNSNames, host)
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" && !strings.ContainsAny(h, " /") {
		tpl.DNSNames = append(tpl.DNSNames, h)
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// Fingerprint is the SHA-256 of a certificate's DER, as browsers show it
// (colon-separated upper-case hex).
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	var b strings.Builder
	for i, x := range sum {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02X", x)
	}
	return b.String()
}
