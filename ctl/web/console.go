package web

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
)

// Console is the HTTPS listener lbd serves the console on.
type Console struct {
	cfg         conf.Web
	users       []conf.WebUser
	ln          net.Listener
	log         *zap.Logger
	Fingerprint string // SHA-256 of the certificate served
}

// Listen reads the users, loads (or generates) the certificate and takes
// the listen address, so that lbd fails before it starts DPDK if any of
// that is wrong.
func Listen(cfg conf.Web, log *zap.Logger) (*Console, error) {
	users, err := cfg.AllUsers()
	if err != nil {
		return nil, err
	}
	if _, err := accounts(users); err != nil {
		return nil, err
	}
	cert, generated, err := loadCertificate(cfg.CertFile, cfg.KeyFile, cfg.TLSDir, cfg.Listen)
	if err != nil {
		return nil, err
	}
	tc, err := serverTLS(cfg, cert)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("web.listen: %w", err)
	}
	c := &Console{cfg: cfg, users: users, ln: tls.NewListener(ln, tc), log: log, Fingerprint: Fingerprint(cert.Certificate[0])}
	fields := []zap.Field{zap.String("url", "https://"+ln.Addr().String()+"/"), zap.String("sha256", c.Fingerprint), zap.Int("users", len(users))}
	switch {
	case generated:
		log.Info("console: generated a self-signed certificate", append(fields, zap.String("dir", cfg.TLSDir))...)
	case cfg.CertFile == "":
		log.Info("console: self-signed certificate", append(fields, zap.String("dir", cfg.TLSDir))...)
	default:
		log.Info("console: certificate", append(fields, zap.String("file", cfg.CertFile))...)
	}
	return c, nil
}

// serverTLS is the console's TLS configuration: its certificate and, with
// web.client_ca_file, the CAs whose client certificates log users in.
func serverTLS(cfg conf.Web, cert tls.Certificate) (*tls.Config, error) {
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	if cfg.ClientCAFile == "" {
		return tc, nil
	}
	pemData, err := os.ReadFile(cfg.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("web.client_ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("web.client_ca_file: no PEM certificate in %s", cfg.ClientCAFile)
	}
	// Asked for, not required: browsers without one get the login form.
	tc.ClientAuth, tc.ClientCAs = tls.VerifyClientCertIfGiven, pool
	return tc, nil
}

// Addr is the address the console listens on.
func (c *Console) Addr() net.Addr { return c.ln.Addr() }

// Close releases the listener of a console that will not be served.
func (c *Console) Close() error { return c.ln.Close() }

// Serve runs the console over h until ctx ends.
func (c *Console) Serve(ctx context.Context, h Handler) error {
	srv, err := New(h, Options{Users: c.users, SessionLifetime: c.cfg.SessionLifetime, Log: c.log, ClientCerts: c.cfg.ClientCAFile != ""})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go srv.Run(ctx)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: zap.NewStdLog(c.log.Named("console"))}
	go func() {
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		hs.Shutdown(sctx)
	}()
	if err := hs.Serve(c.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
