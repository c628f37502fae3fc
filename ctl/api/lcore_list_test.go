package api

import (
	"strings"
	"testing"
)

func TestPerLcoreListing(t *testing.T) {
	resp := Response{Info: &Info{ConnTableSize: 2048}, Lcores: []Lcore{
		{ID: 0, RxPackets: 1500, TxPackets: 1490, Drops: 10, HandedOff: 700, HandedIn: 650, Connections: 3, BusyPercent: 12.34, CyclesPerPacket: 141.6},
		{ID: 1, RxPackets: 2500000, TxPackets: 12, Drops: 0, HandedOff: 0, HandedIn: 0, Connections: 0},
	}}
	var b strings.Builder
	if err := WriteList(&b, resp, ListFormat{PerLcore: true}); err != nil {
		t.Fatal(err)
	}
	want := "dplb lbctl (API v1) (size=2048)\n" +
		"Prot LocalAddress:Port Scheduler Flags\n" +
		"  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n" +
		"Lcore    RxPkts    TxPkts     Drops HandedOff  HandedIn     Conns  Busy%  Cyc/Pkt\n" +
		"0          1500      1490        10       700       650         3   12.3      142\n" +
		"1       2500000        12         0         0         0         0    0.0        0\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	req, err := ParseArgs([]string{"-L", "-n", "--per-lcore"})
	if err != nil || !req.List.PerLcore {
		t.Fatalf("--per-lcore not parsed: %+v %v", req, err)
	}
}
