package api

import "testing"

func TestAllowed(t *testing.T) {
	tests := []struct {
		name     string
		uid, gid uint32
		allowGID int
		want     bool
	}{
		{"root, root only", 0, 0, -1, true},
		{"root with other gid", 0, 1000, -1, true},
		{"root, group configured", 0, 5, 100, true},
		{"user, root only", 1000, 1000, -1, false},
		{"user in group", 1000, 100, 100, true},
		{"user not in group", 1000, 1000, 100, false},
		{"user in group 0", 1000, 0, 0, true},
		{"user gid 0, root only", 1000, 0, -1, false},
		{"huge gid does not wrap", 1000, 1<<32 - 1, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := allowed(tt.uid, tt.gid, tt.allowGID); got != tt.want {
				t.Errorf("allowed(%d, %d, %d) = %v, want %v", tt.uid, tt.gid, tt.allowGID, got, tt.want)
			}
		})
	}
}

func TestLargeNum(t *testing.T) {
	tests := []struct {
		n     uint64
		exact bool
		want  string
	}{
		{0, false, "        0"},
		{99_999_999, false, " 99999999"},
		{100_000_000, false, "  100000K"},
		{999_999_999, false, "  999999K"},
		{1_000_000_000, false, "    1000M"},
		{99_999_999_999, false, "   99999M"},
		{100_000_000_000, false, "     100G"},
		{99_999_999_999_999, false, "   99999G"},
		{100_000_000_000_000, false, "     100T"},
		{1<<64 - 1, false, "18446744T"},
		{0, true, "        0"},
		{12_345_678, true, " 12345678"},
		{123_456_789, true, " 123456789"},
		{1<<64 - 1, true, " 18446744073709551615"},
	}
	for _, tt := range tests {
		if got := largeNum(tt.n, tt.exact); got != tt.want {
			t.Errorf("largeNum(%d, %v) = %q, want %q", tt.n, tt.exact, got, tt.want)
		}
	}
}

func TestAddrPort(t *testing.T) {
	tests := []struct {
		addr string
		port uint16
		want string
	}{
		{"192.0.2.1", 80, "192.0.2.1:80"},
		{"2001:db8::1", 443, "[2001:db8::1]:443"},
		{"2001:0db8:0:0::1", 443, "[2001:db8::1]:443"},
		{"bogus", 1, "bogus:1"},
	}
	for _, tt := range tests {
		if got := addrPort(tt.addr, tt.port); got != tt.want {
			t.Errorf("addrPort(%q, %d) = %q, want %q", tt.addr, tt.port, got, tt.want)
		}
	}
}
