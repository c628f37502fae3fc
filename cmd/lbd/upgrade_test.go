package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// script writes an executable shell script standing in for a new lbd
// binary (what it does with -check is all the upgrader runs).
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "lbd")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUpgradeRefusesABinaryThatFailsCheck(t *testing.T) {
	var stops atomic.Int32
	u := &upgrader{config: "/etc/dplb/lbd.yaml", run: context.Background(), stop: func() { stops.Add(1) }}
	bad := script(t, `echo "lbd: services[0].scheduler: \"foo\" is not a scheduler" >&2; exit 2`)
	plain := filepath.Join(t.TempDir(), "plain")
	os.WriteFile(plain, []byte("not a program"), 0o644)
	for bin, want := range map[string]string{
		bad:              `-check -c /etc/dplb/lbd.yaml failed (exit status 2): lbd: services[0].scheduler: "foo" is not a scheduler`,
		"relative/lbd":   "not an absolute path",
		"/nonexistent/x": "no such file",
		plain:            "not an executable file",
	} {
		_, err := u.request(bin)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("upgrade to %s: %v, want an error saying %q", bin, err, want)
		}
	}
	if stops.Load() != 0 || u.upgrading() {
		t.Errorf("a refused upgrade stopped lbd (%d stops, upgrading %t)", stops.Load(), u.upgrading())
	}
}

// TestOneUpgradeAtATime: an upgrade asked for while one is checked, or
// under way, is refused; the one under way stops lbd once.
func TestOneUpgradeAtATime(t *testing.T) {
	var stops atomic.Int32
	slow := script(t, `sleep 1; echo "lbd: configuration OK"`)
	u := &upgrader{config: "/etc/dplb/lbd.yaml", self: slow, run: context.Background(), stop: func() { stops.Add(1) }}
	done := make(chan error, 1)
	go func() {
		_, err := u.request("") // the binary lbd was started from
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		u.mu.Lock()
		checking := u.checking
		u.mu.Unlock()
		if checking || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := u.request(slow); err == nil || !strings.Contains(err.Error(), "already in progress") {
		t.Errorf("a second upgrade while the first is checked: %v, want a refusal", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the first upgrade: %v", err)
	}
	if _, err := u.request(slow); err == nil || !strings.Contains(err.Error(), "already in progress") {
		t.Errorf("an upgrade while one is under way: %v, want a refusal", err)
	}
	if stops.Load() != 1 || !u.upgrading() {
		t.Errorf("%d stops, upgrading %t; want 1 and true", stops.Load(), u.upgrading())
	}
}

// TestNoUpgradeWhileStopping: a binary that passes its check after lbd
// began to stop (SIGTERM) does not turn the stop into an upgrade.
func TestNoUpgradeWhileStopping(t *testing.T) {
	run, cancel := context.WithCancel(context.Background())
	cancel()
	ok := script(t, `echo "lbd: configuration OK"`)
	u := &upgrader{config: "/etc/dplb/lbd.yaml", run: run, stop: cancel}
	if _, err := u.request(ok); err == nil || !strings.Contains(err.Error(), "stopping") {
		t.Errorf("upgrade while stopping: %v, want a refusal", err)
	}
	if u.upgrading() {
		t.Error("a stopping lbd would exec the new binary")
	}
}
