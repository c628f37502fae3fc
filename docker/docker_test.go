package docker

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	b, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
	}
	return string(b)
}

// TestImageBuildsAndStarts builds the image with build.sh (debootstrap
// base, docker import, docker build with no pull) and starts it: lbd
// checks the example configuration, lbctl answers. Only where a Docker
// engine answers and as root (debootstrap).
func TestImageBuildsAndStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building an image takes minutes")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("SKIPPED: no docker command: the image was not built")
	}
	if b, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: no Docker engine answers `docker info` (%v): the image was not built or started here; docker/build.sh does it where one runs.\n%s",
			err, lastLine(string(b)))
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: not root: debootstrap needs root")
	}
	tag := fmt.Sprintf("dplb-test:%d", os.Getpid())
	t.Cleanup(func() { exec.Command("docker", "image", "rm", "-f", tag).Run() })
	run(t, "bash", "build.sh", tag)
	if out := run(t, "docker", "run", "--rm", tag, "-check", "-c", "/etc/dplb/lbd.yaml"); !strings.Contains(out, "configuration OK") {
		t.Fatalf("lbd -check in the image: %s", out)
	}
	if out := run(t, "docker", "run", "--rm", "--entrypoint", "/usr/local/bin/lbctl", tag, "--version"); !strings.Contains(out, "lbctl (dplb)") {
		t.Fatalf("lbctl --version in the image: %s", out)
	}
}

// TestRootfsRunsLBD builds the image's base with rootfs.sh alone (no
// Docker needed) and runs lbd -check inside it with chroot: the base
// holds every library lbd links. Root only, and only when debootstrap is
// installed (scripts/setup.sh installs it).
func TestRootfsRunsLBD(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: debootstrap takes minutes")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: not root: debootstrap needs root")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("SKIPPED: debootstrap is not installed (scripts/setup.sh installs it)")
	}
	dir := filepath.Join(t.TempDir(), "fs")
	run(t, "bash", "rootfs.sh", dir)
	lbd := filepath.Join(dir, "usr/local/bin/lbd")
	cmd := exec.Command("go", "build", "-o", lbd, "../cmd/lbd")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	b, err := os.ReadFile("../conf/lbd.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "etc/dplb"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc/dplb/lbd.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(t, "chroot", dir, "/usr/local/bin/lbd", "-check", "-c", "/etc/dplb/lbd.yaml"); !strings.Contains(out, "configuration OK") {
		t.Fatalf("lbd -check in the base: %s", out)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
