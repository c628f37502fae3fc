package api

import (
	"bytes"
	"reflect"
	"testing"
)

func TestDiffRules(t *testing.T) {
	web := Service{Protocol: "TCP", VIP: "192.0.2.10", Port: 80, Scheduler: "rr", Servers: []RealServer{
		{Address: "198.51.100.11", Port: 80, Forward: "Masq", Weight: 1},
		{Address: "198.51.100.12", Port: 80, Forward: "Masq", Weight: 2},
	}}
	dns := Service{Protocol: "UDP", VIP: "192.0.2.10", Port: 53, Scheduler: "wrr", Servers: []RealServer{
		{Address: "198.51.100.21", Port: 53, Forward: "Route", Weight: 1},
	}}
	t.Run("same", func(t *testing.T) {
		// Order does not matter: services and servers compare sorted.
		web2 := web
		web2.Servers = []RealServer{web.Servers[1], web.Servers[0]}
		if got := DiffRules([]Service{web, dns}, []Service{dns, web2}, &TimeoutsSpec{900, 120, 300}, &TimeoutsSpec{900, 120, 300}); len(got) != 0 {
			t.Fatalf("changes %+v, want none", got)
		}
	})
	t.Run("everything", func(t *testing.T) {
		edited := web
		edited.Scheduler, edited.Persistence = "wlc", 600
		edited.Servers = []RealServer{
			{Address: "198.51.100.12", Port: 80, Forward: "Route", Weight: 3, Upper: 100}, // changed
			{Address: "198.51.100.13", Port: 80, Forward: "Masq", Weight: 1},              // added
		} // .11 removed
		got := DiffRules([]Service{web, dns}, []Service{edited}, &TimeoutsSpec{900, 120, 300}, &TimeoutsSpec{600, 120, 300})
		want := []Change{
			{Kind: ChangeEdit, Rule: "--set 600 120 300", Fields: []FieldChange{{"--set tcp", "900", "600"}}},
			{Kind: ChangeEdit, Service: "-t 192.0.2.10:80", Rule: "-A -t 192.0.2.10:80 -s wlc -p 600",
				Fields: []FieldChange{{"-s", "rr", "wlc"}, {"-p", "0", "600"}}},
			{Kind: ChangeRemove, Service: "-t 192.0.2.10:80", Server: "198.51.100.11:80", Rule: "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -m -w 1"},
			{Kind: ChangeEdit, Service: "-t 192.0.2.10:80", Server: "198.51.100.12:80", Rule: "-a -t 192.0.2.10:80 -r 198.51.100.12:80 -g -w 3 -x 100",
				Fields: []FieldChange{{"-g|-i|-m", "-m", "-g"}, {"-w", "2", "3"}, {"-x", "0", "100"}}},
			{Kind: ChangeAdd, Service: "-t 192.0.2.10:80", Server: "198.51.100.13:80", Rule: "-a -t 192.0.2.10:80 -r 198.51.100.13:80 -m -w 1"},
			{Kind: ChangeRemove, Service: "-u 192.0.2.10:53", Rule: "-A -u 192.0.2.10:53 -s wrr"},
			{Kind: ChangeRemove, Service: "-u 192.0.2.10:53", Server: "198.51.100.21:53", Rule: "-a -u 192.0.2.10:53 -r 198.51.100.21:53 -g -w 1"},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("changes:\n%+v\nwant:\n%+v", got, want)
		}
		var b bytes.Buffer
		if err := WriteDiff(&b, got); err != nil {
			t.Fatal(err)
		}
		wantText := "~ --set 600 120 300\n" +
			"    --set tcp 900 -> 600\n" +
			"~ -A -t 192.0.2.10:80 -s wlc -p 600\n" +
			"    -s rr -> wlc\n" +
			"    -p 0 -> 600\n" +
			"- -a -t 192.0.2.10:80 -r 198.51.100.11:80 -m -w 1\n" +
			"~ -a -t 192.0.2.10:80 -r 198.51.100.12:80 -g -w 3 -x 100\n" +
			"    -g|-i|-m -m -> -g\n" +
			"    -w 2 -> 3\n" +
			"    -x 0 -> 100\n" +
			"+ -a -t 192.0.2.10:80 -r 198.51.100.13:80 -m -w 1\n" +
			"- -A -u 192.0.2.10:53 -s wrr\n" +
			"- -a -u 192.0.2.10:53 -r 198.51.100.21:53 -g -w 1\n"
		if b.String() != wantText {
			t.Fatalf("text:\n%s\nwant:\n%s", b.String(), wantText)
		}
	})
	t.Run("added service with servers", func(t *testing.T) {
		got := DiffRules(nil, []Service{dns}, nil, nil)
		if len(got) != 2 || got[0].Kind != ChangeAdd || got[0].Server != "" || got[1].Server != "198.51.100.21:53" {
			t.Fatalf("changes %+v", got)
		}
	})
}

func TestWriteTimeouts(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTimeouts(&b, Response{Timeouts: &TimeoutsSpec{TCP: 900, TCPFin: 120, UDP: 300}}); err != nil {
		t.Fatal(err)
	}
	if want := "Timeout (tcp tcpfin udp): 900 120 300\n"; b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
	if err := WriteTimeouts(&b, Response{}); err == nil {
		t.Fatal("no timeouts: want an error")
	}
}
