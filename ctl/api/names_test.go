package api

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// fakeResolver answers from a table for the test's duration.
func fakeResolver(t *testing.T, hosts map[string][]string) {
	t.Helper()
	old := lookupIPv4
	lookupIPv4 = func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range hosts[host] {
			out = append(out, netip.MustParseAddr(a))
		}
		if out == nil {
			return nil, errors.New("no such host")
		}
		return out, nil
	}
	t.Cleanup(func() { lookupIPv4 = old })
}

// TestRestoreNames: a file ipvsadm -S wrote without -n restores, names
// resolved once at parse time; a name that does not resolve, or resolves
// to several addresses, is refused with its line.
func TestRestoreNames(t *testing.T) {
	fakeResolver(t, map[string][]string{
		"lb.example.com": {"192.0.2.100"},
		"web1":           {"198.51.100.11"},
		"dns1":           {"198.51.100.21"},
		"web.pool":       {"198.51.100.11", "198.51.100.12"},
	})
	reqs, err := ParseRestore(`-A -t lb.example.com:http -s wlc
-a -t lb.example.com:http -r web1:http-alt -m -w 1
-a -t lb.example.com:www -r web1 -g
-A -u lb.example.com:domain -s rr
-a -u lb.example.com:domain -r dns1:domain -m
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"tcp 192.0.2.100:80", "tcp 192.0.2.100:80 198.51.100.11:8080", "tcp 192.0.2.100:80 198.51.100.11:0",
		"udp 192.0.2.100:53", "udp 192.0.2.100:53 198.51.100.21:53",
	}
	for i, r := range reqs {
		got := r.Service.Protocol + " " + r.Service.VIP + ":" + strconv.Itoa(r.Service.Port)
		if r.Server != nil {
			got += " " + r.Server.Address + ":" + strconv.Itoa(r.Server.Port)
		}
		if got != want[i] {
			t.Errorf("line %d: %s, want %s", i+1, got, want[i])
		}
	}
	for _, c := range []struct{ file, want string }{
		{"-A -t nowhere.example:80", `line 1: -t nowhere.example:80: host name "nowhere.example" does not resolve to an IPv4 address`},
		{"-A -t 192.0.2.100:80\n-a -t 192.0.2.100:80 -r web.pool:80", `line 2: -r web.pool:80: host name "web.pool" resolves to 2 addresses (198.51.100.11, 198.51.100.12): give one of them`},
		{"-A -t lb.example.com:nosuch", `line 1: -t lb.example.com:nosuch: port "nosuch" is not a number or a tcp service name (/etc/services)`},
		{"-A -t 2001:db8::1", `line 1: -t 2001:db8::1: want VIP:port, e.g. 192.0.2.100:80 or [2001:db8::10]:80`},
	} {
		if _, err := ParseRestore(c.file); err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %q", c.file, err, c.want)
		}
	}
}

// TestNameRules: -S without -n names what it can, keeps the rest numeric.
func TestNameRules(t *testing.T) {
	services := filepath.Join(t.TempDir(), "services")
	if err := os.WriteFile(services, []byte("# comment\nhttp\t80/tcp\twww # WWW\nhttp-alt 8080/tcp webcache\ndomain\t53/tcp\ndomain\t53/udp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	svc := SystemNamer(services).Service
	n := Namer{
		Host: func(a string) string {
			return map[string]string{"192.0.2.100": "lb.example.com", "198.51.100.11": "web1"}[a]
		},
		Service: svc,
	}
	in := "-A -t 192.0.2.100:80 -s wlc\n-a -t 192.0.2.100:80 -r 198.51.100.11:8080 -m -w 1\n-a -t 192.0.2.100:80 -r 198.51.100.12:8081 -m -w 2\n-A -u 192.0.2.100:53 -s rr\n--set 900 120 300\n"
	want := "-A -t lb.example.com:http -s wlc\n-a -t lb.example.com:http -r web1:http-alt -m -w 1\n-a -t lb.example.com:http -r 198.51.100.12:8081 -m -w 2\n-A -u lb.example.com:domain -s rr\n--set 900 120 300\n"
	if got := NameRules(in, n); got != want {
		t.Fatalf("NameRules:\n%s\nwant\n%s", got, want)
	}
	// What it writes, a restore reads back to the same rules.
	fakeResolver(t, map[string][]string{"lb.example.com": {"192.0.2.100"}, "web1": {"198.51.100.11"}})
	a, err1 := ParseRestore(in)
	b, err2 := ParseRestore(want)
	if err1 != nil || err2 != nil || len(a) != len(b) {
		t.Fatalf("%v %v %d %d", err1, err2, len(a), len(b))
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("numeric and named rules differ:\n%+v\n%+v", a, b)
	}
}
