package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDoctorExitCodes: lbd doctor exits 1 when a check fails (an empty
// /proc and /sys: no hugepages), 0 when none does, 2 on a bad command line.
func TestDoctorExitCodes(t *testing.T) {
	empty := t.TempDir()
	if code := doctorMain([]string{"-c", "../../conf/lbd.example.yaml", "-root", empty, "-o", "json"}); code != 1 {
		t.Errorf("empty host: exit %d, want 1", code)
	}
	ready := t.TempDir()
	for p, v := range map[string]string{
		"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":   "512",
		"sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages": "512",
		"proc/mounts": "nodev /dev/hugepages hugetlbfs rw 0 0",
	} {
		if err := os.MkdirAll(filepath.Join(ready, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ready, p), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The example's af_packet ports need no binding; its shared CPU 0 only warns.
	if code := doctorMain([]string{"-c", "../../conf/lbd.example.yaml", "-root", ready}); code != 0 {
		t.Errorf("ready host: exit %d, want 0", code)
	}
	if code := doctorMain([]string{"-c", "../../conf/lbd.example.yaml", "-o", "yaml"}); code != 2 {
		t.Errorf("-o yaml: exit %d, want 2", code)
	}
	if code := doctorMain([]string{"-c", filepath.Join(empty, "missing.yaml"), "-root", ready}); code != 1 {
		t.Errorf("missing config: exit %d, want 1", code)
	}
}
