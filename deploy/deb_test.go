package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildDeb runs scripts/deb.sh into a temporary directory and returns
// the package's path.
func buildDeb(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: building the package takes minutes")
	}
	for _, tool := range []string{"go", "dpkg-deb", "gzip", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: cannot build the package", tool)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("bash", "../scripts/deb.sh", out)
	cmd.Dir = "."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deb.sh: %v\n%s", err, b)
	}
	debs, _ := filepath.Glob(filepath.Join(out, "dplb_*_amd64.deb"))
	if len(debs) != 1 {
		t.Fatalf("want one dplb_*_amd64.deb in %s, have %v", out, debs)
	}
	return debs[0]
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	b, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
	}
	return string(b)
}

// packaged extracts one file of the package.
func packaged(t *testing.T, deb, path string) string {
	t.Helper()
	dir := t.TempDir()
	run(t, "sh", "-c", `dpkg-deb --fsys-tarfile "$1" | tar -x -C "$2" "$3"`, "sh", deb, dir, "."+path)
	b, err := os.ReadFile(filepath.Join(dir, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDebianPackage(t *testing.T) {
	deb := buildDeb(t)
	list := run(t, "dpkg-deb", "-c", deb)
	for _, want := range []string{
		"./usr/bin/lbd", "./usr/bin/lbctl", "./usr/bin/lbgen",
		"./etc/dplb/lbd.yaml", "./etc/default/dplb",
		"./usr/lib/systemd/system/lbd.service", "./usr/lib/dplb/dplb-hugepages",
		"./usr/share/bash-completion/completions/lbctl",
		"./usr/share/man/man8/lbd.8.gz", "./usr/share/man/man8/lbctl.8.gz", "./usr/share/man/man5/lbd.yaml.5.gz",
		"./usr/share/doc/dplb/docs/deploy.md", "./usr/share/doc/dplb/observability/alerts.yml",
	} {
		if !strings.Contains(list, " "+want+"\n") {
			t.Errorf("package lacks %s", want)
		}
	}
	info := run(t, "dpkg-deb", "-I", deb)
	for _, want := range []string{"Package: dplb", "Depends: dpdk (>= 22.11)", "postinst", "postrm", "conffiles"} {
		if !strings.Contains(info, want) {
			t.Errorf("control lacks %q", want)
		}
	}
	conffiles := run(t, "sh", "-c", `dpkg-deb --ctrl-tarfile "$1" | tar -xO ./conffiles`, "sh", deb)
	if !strings.Contains(conffiles, "/etc/dplb/lbd.yaml") {
		t.Errorf("/etc/dplb/lbd.yaml is not a conffile: %q", conffiles)
	}
	unit := packaged(t, deb, "/usr/lib/systemd/system/lbd.service")
	for _, want := range []string{
		"ExecStartPre=/usr/lib/dplb/dplb-hugepages", "ExecReload=/bin/kill -HUP $MAINPID",
		"Restart=on-failure", "CPUAffinity=", "RuntimeDirectory=dplb", "ExecStart=/usr/bin/lbd -c /etc/dplb/lbd.yaml",
	} {
		if !strings.Contains(unit, want+"\n") {
			t.Errorf("lbd.service lacks %q", want)
		}
	}
	cfg := packaged(t, deb, "/etc/dplb/lbd.yaml")
	if !strings.Contains(cfg, "\n  group: dplb ") || !strings.Contains(cfg, "\n  socket_mode: 0660 ") {
		t.Error("the packaged lbd.yaml does not open the socket to group dplb")
	}
	completion := packaged(t, deb, "/usr/share/bash-completion/completions/lbctl")
	if !strings.Contains(completion, "complete -F _lbctl lbctl") {
		t.Error("the completion does not complete lbctl")
	}
	if _, err := exec.LookPath("groff"); err == nil {
		for _, m := range []string{"/usr/share/man/man8/lbd.8.gz", "/usr/share/man/man8/lbctl.8.gz", "/usr/share/man/man5/lbd.yaml.5.gz"} {
			dir := t.TempDir()
			run(t, "sh", "-c", `dpkg-deb --fsys-tarfile "$1" | tar -x -C "$2" "$3"`, "sh", deb, dir, "."+m)
			// -ww: every warning; a page that groff warns about renders badly.
			if out := run(t, "sh", "-c", `zcat "$1" | groff -man -Tutf8 -ww -z 2>&1`, "sh", filepath.Join(dir, m)); out != "" {
				t.Errorf("%s: groff: %s", m, out)
			}
		}
	}
}

// TestDebianPackageInstalls installs the package on this machine with
// dpkg, checks the packaged configuration with the installed lbd and
// purges it again. Root only; skipped where dplb is installed already
// (not this test's to remove).
func TestDebianPackageInstalls(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: installing a package needs root")
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", "dplb").Output(); err == nil && strings.Contains(string(out), "installed") {
		t.Skip("a dplb package is installed on this machine already: not removing it")
	}
	deb := buildDeb(t)
	t.Cleanup(func() {
		if b, err := exec.Command("dpkg", "--purge", "dplb").CombinedOutput(); err != nil {
			t.Errorf("dpkg --purge dplb: %v\n%s", err, b)
		}
		if _, err := os.Stat("/usr/bin/lbd"); err == nil {
			t.Error("/usr/bin/lbd left after purge")
		}
		if _, err := os.Stat("/etc/dplb/lbd.yaml"); err == nil {
			t.Error("/etc/dplb/lbd.yaml left after purge")
		}
	})
	run(t, "dpkg", "-i", deb)
	if out := run(t, "/usr/bin/lbd", "-check", "-c", "/etc/dplb/lbd.yaml"); !strings.Contains(out, "configuration OK") {
		t.Fatalf("lbd -check: %s", out)
	}
	run(t, "getent", "group", "dplb")
	if out := run(t, "/usr/bin/lbctl", "--help"); !strings.Contains(out, "--restore") {
		t.Fatalf("lbctl --help: %s", out)
	}
}
