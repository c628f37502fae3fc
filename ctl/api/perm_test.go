package api_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
)

// TestHelperCall is not a test: TestPeerCredentials runs the test binary
// as another user with DPLB_TEST_CALL set, and this makes one Call.
func TestHelperCall(t *testing.T) {
	path := os.Getenv("DPLB_TEST_CALL")
	if path == "" {
		t.Skip("helper for TestPeerCredentials")
	}
	_, err := api.Call(context.Background(), path, api.Request{Op: api.OpList})
	fmt.Fprintf(os.Stdout, "result: %v\n", err)
}

// TestPeerCredentials runs a client as uid/gid 65534 against a real
// Server: refused unless its group is allowed, and the socket's mode is
// enforced by the kernel before lbd sees anything.
func TestPeerCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	dir, err := os.MkdirTemp("", "dplb-perm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A copy of the test binary that user 65534 can execute.
	bin := filepath.Join(dir, "api.test")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err == nil {
		_, err = io.Copy(dst, src)
		dst.Close()
	}
	src.Close()
	if err != nil {
		t.Fatal(err)
	}

	const nobody = 65534
	tests := []struct {
		name     string
		mode     os.FileMode
		allowGID int
		want     string
	}{
		{"root only", 0o666, -1, "result: permission denied: uid 65534 is not root or in the configured group"},
		{"other group", 0o666, 1234, "result: permission denied: uid 65534 is not root or in the configured group"},
		{"group allowed", 0o666, nobody, "result: <nil>"},
		{"socket mode", 0o600, nobody, "result: cannot connect to SOCK (run as root or as a member of lbd's group): dial unix SOCK: connect: permission denied"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("lbd%d.sock", i))
			l, err := api.Listen(path, tt.mode, -1)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- (&api.Server{Handler: fakeLBD, AllowGID: tt.allowGID, Logf: t.Logf}).Serve(ctx, l)
			}()
			defer func() { cancel(); <-done }()

			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer ccancel()
			cmd := exec.CommandContext(cctx, bin, "-test.run=^TestHelperCall$", "-test.v")
			cmd.Env = []string{"DPLB_TEST_CALL=" + path}
			cmd.Dir = dir
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("client: %v\n%s", err, out)
			}
			want := strings.ReplaceAll(tt.want, "SOCK", path)
			if !strings.Contains(string(out), want+"\n") {
				t.Errorf("client output:\n%s\nwant a line %q", out, want)
			}
		})
	}
}
