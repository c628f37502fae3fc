package fwd

import "testing"

func TestMethodNames(t *testing.T) {
	for m, want := range map[Method]string{NAT: "nat", DR: "dr", TUN: "tun", FullNAT: "fullnat", 7: "invalid"} {
		if got := m.String(); got != want {
			t.Errorf("Method(%d).String() = %q, want %q", m, got, want)
		}
	}
	if NAT.OneWay() || FullNAT.OneWay() || !DR.OneWay() || !TUN.OneWay() {
		t.Error("only NAT and FullNAT see the replies")
	}
}
