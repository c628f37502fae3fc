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

// TestDiffClientLists: client lists change as fields -k and -2, an added
// or removed service's lists too; no rule carries their entries.
func TestDiffClientLists(t *testing.T) {
	web := Service{Protocol: "TCP", VIP: "192.0.2.10", Port: 80, Scheduler: "rr", Blocklist: []string{"192.0.2.7"},
		Servers: []RealServer{{Address: "198.51.100.11", Port: 80, Forward: "Masq", Weight: 1}}}
	edited := web
	edited.Blocklist = []string{"192.0.2.7", "203.0.113.0/24"}
	edited.Allowlist = []string{"192.0.2.0/24"}
	got := DiffRules([]Service{web}, []Service{edited}, nil, nil)
	want := []Change{{Kind: ChangeEdit, Service: "-t 192.0.2.10:80", Rule: "-A -t 192.0.2.10:80 -s rr",
		Fields: []FieldChange{{"-k", "192.0.2.7", "192.0.2.7,203.0.113.0/24"}, {"-2", "", "192.0.2.0/24"}}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes:\n%+v\nwant:\n%+v", got, want)
	}
	var b bytes.Buffer
	WriteDiff(&b, got)
	if want := "~ -A -t 192.0.2.10:80 -s rr\n    -k 192.0.2.7 -> 192.0.2.7,203.0.113.0/24\n    -2  -> 192.0.2.0/24\n"; b.String() != want {
		t.Fatalf("text:\n%s\nwant:\n%s", b.String(), want)
	}
	got = DiffRules(nil, []Service{edited}, nil, nil)
	want = []Change{
		{Kind: ChangeAdd, Service: "-t 192.0.2.10:80", Rule: "-A -t 192.0.2.10:80 -s rr",
			Fields: []FieldChange{{"-k", "", "192.0.2.7,203.0.113.0/24"}, {"-2", "", "192.0.2.0/24"}}},
		{Kind: ChangeAdd, Service: "-t 192.0.2.10:80", Server: "198.51.100.11:80", Rule: "-a -t 192.0.2.10:80 -r 198.51.100.11:80 -m -w 1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("added:\n%+v\nwant:\n%+v", got, want)
	}
	if got := DiffRules([]Service{web}, nil, nil, nil); len(got) != 2 || got[0].Kind != ChangeRemove ||
		!reflect.DeepEqual(got[0].Fields, []FieldChange{{"-k", "192.0.2.7", ""}}) {
		t.Fatalf("removed: %+v", got)
	}
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
