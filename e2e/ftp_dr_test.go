package e2e

import (
	"os/exec"
	"testing"

	"github.com/dplb/dplb/e2e/harness"
)

// TestFTPThroughDRPortZero: FTP through VS/DR as the LVS documents run
// it, with no helper: a persistent port-zero service (ipvsadm -A -t
// VIP:0 -p) on vsftpd's two servers, whose passive data connections to
// VIP:50000-50999 follow the control connection's server because the
// client's template is the VIP's, not a port's. curl downloads a 1 MiB
// file in passive mode (PASV and EPSV) four times; every download is
// byte for byte one server's file, always the same server.
func TestFTPThroughDRPortZero(t *testing.T) {
	if _, err := exec.LookPath("vsftpd"); err != nil {
		t.Skip("FTP test: vsftpd not found (run scripts/setup.sh)")
	}
	e, dir := newEnv(t)
	l := e.buildLVS(t, false)
	sums := map[string]string{}
	for _, h := range l.Servers {
		sums[startVsftpd(t, e.topo, h, dir)] = h.Name
	}
	cfg := harness.LVSConfig(l, e.topo.Suffix(), dir, "tcp", 0)
	cfg.Services[0].Persistence = "300s"
	e.startLBD(t, cfg, dir)
	src := l.Client.Addr.Addr().String()

	e.warmUpFTP(t, dir, src, ftpModes[0].flags)
	got := map[string]int{}
	for range 2 {
		for _, m := range ftpModes[:2] { // passive: the client opens the data connection
			sum, err := e.fetch(t, dir, src, m.flags)
			switch {
			case err != nil:
				t.Fatalf("%s: %v", m.name, err)
			case sums[sum] == "":
				t.Fatalf("%s: the download is neither server's file (sha256 %s)", m.name, sum)
			}
			got[sums[sum]]++
		}
	}
	if len(got) != 1 {
		t.Fatalf("downloads per server %v: persistence should keep the client on one", got)
	}
	t.Logf("downloads per server %v", got)
	e.stop(t)
}
