package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl"
)

func writeKeepalived(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keepalived.conf")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImportKeepalived: the services on stdout, the losses on stderr, and
// the exit status says whether there were any.
func TestImportKeepalived(t *testing.T) {
	clean := `vrrp_instance VI_1 {
    state BACKUP
}
virtual_server 192.0.2.10 80 {
    delay_loop 6
    lb_algo rr
    real_server 198.51.100.11 80 {
        TCP_CHECK {
            connect_timeout 3
        }
    }
}
`
	lossy := strings.Replace(clean, "lb_algo rr", "lb_algo rr\n    quorum_up /bin/true", 1) + "virtual_server fwmark 7 {\n}\n"
	dir := t.TempDir()
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"everything carried over", []string{"-f", writeKeepalived(t, clean)}, 0, `services:
  # virtual_server at PATH:4
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    servers:
      - address: 198.51.100.11
    health:
      type: tcp
      interval: 6s
      timeout: 3s
      rise: 1
      fall: 2
      retry_interval: 1s
`, "PATH:1: note: vrrp_instance: VRRP stays keepalived's job: keep keepalived for failover, its notify scripts driving lbd (deploy/keepalived, docs/deploy.md)\n"},
		{"something dropped", []string{"-f", writeKeepalived(t, lossy)}, 1, `services:
  # virtual_server at PATH:4
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    servers:
      - address: 198.51.100.11
    health:
      type: tcp
      interval: 6s
      timeout: 3s
      rise: 1
      fall: 2
      retry_interval: 1s
`, "PATH:1: note: vrrp_instance: VRRP stays keepalived's job: keep keepalived for failover, its notify scripts driving lbd (deploy/keepalived, docs/deploy.md)\n" +
			"PATH:7: quorum_up: lbd runs no quorum scripts: dropped\n" +
			"PATH:14: virtual_server: lbd has no fwmark services (they balance by address and port): virtual server skipped\n"},
		{"unreadable", []string{"-f", filepath.Join(dir, "missing.conf")}, 2, "",
			"lbd import-keepalived: open " + filepath.Join(dir, "missing.conf") + ": no such file or directory\n"},
		{"not keepalived's grammar", []string{"-f", writeKeepalived(t, "virtual_server 192.0.2.10 80 {\n")}, 2, "",
			"lbd import-keepalived: PATH:1: the block of virtual_server is not closed (a '}' is missing)\n"},
		{"stray argument", []string{"keepalived.conf"}, 2, "",
			"lbd import-keepalived: unexpected argument \"keepalived.conf\" (the file goes after -f)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := importKeepalivedMain(tt.args, &stdout, &stderr)
			path := tt.args[len(tt.args)-1]
			header := "# services converted from PATH by lbd import-keepalived;\n# add the ports: section (see lbd.yaml(5)) and check with lbd -check\n"
			wantOut := tt.stdout
			if wantOut != "" {
				wantOut = header + wantOut
			}
			wantOut = strings.ReplaceAll(wantOut, "PATH", path)
			wantErr := strings.ReplaceAll(tt.stderr, "PATH", path)
			if code != tt.code || stdout.String() != wantOut || stderr.String() != wantErr {
				t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d, stdout:\n%s\nstderr:\n%s", code, &stdout, &stderr, tt.code, wantOut, wantErr)
			}
		})
	}
}

// TestImportKeepalivedSchedulers: every scheduler keepalived knows is one
// of lbd's, under the same name.
func TestImportKeepalivedSchedulers(t *testing.T) {
	var text strings.Builder
	names := []string{"rr", "wrr", "lc", "wlc", "lblc", "sh", "mh", "dh", "fo", "ovf", "lblcr", "sed", "nq", "twos"}
	for i, s := range names {
		text.WriteString("virtual_server 192.0.2.10 " + string(rune('1'+i/10)) + string(rune('0'+i%10)) + " {\n  lb_algo " + s + "\n  real_server 198.51.100.11\n}\n")
	}
	var stdout, stderr bytes.Buffer
	if code := importKeepalivedMain([]string{"-f", writeKeepalived(t, text.String())}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	cfg, err := conf.Parse(append([]byte("ports:\n  - {name: lan, device: net_ring0, address: 198.51.100.1/24}\n"), stdout.Bytes()...))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Services) != len(names) {
		t.Fatalf("%d services, want %d", len(cfg.Services), len(names))
	}
	if err := cfg.CheckSchedulers(ctl.Schedulers()); err != nil {
		t.Error(err)
	}
}
