package fwd

import "testing"

func TestMethodNames(t *testing.T) {
	for m, want := range map[Method]string{NAT: "nat", DR: "dr", TUN: "tun", 7: "invalid"} {
		if got := m.String(); got != want {
			t.Errorf("Method(%d).String() = %q, want %q", m, got, want)
		}
	}
	if NAT.OneWay() || !DR.OneWay() || !TUN.OneWay() {
		t.Error("only NAT sees the replies")
	}
}
