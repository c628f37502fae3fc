package conf_test

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/conf"
)

func TestDefaultHealthCheck(t *testing.T) {
	want := conf.HealthCheck{
		Type: "none", Interval: 2 * time.Second, Timeout: time.Second, Rise: 2, Fall: 3,
		Target: "server", Method: "GET", Path: "/", ExpectStatus: "200-399",
		TLSSkipVerify: true, OnFailure: "keep", DNSName: ".", DNSType: "SOA",
		BFDInterval: 300 * time.Millisecond, BFDMultiplier: 3, BFDKeyID: 1,
	}
	if got := conf.DefaultHealthCheck(); !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultHealthCheck() =\n%+v\nwant\n%+v", got, want)
	}
	// Zero values of a Go literal mean the defaults, but false stays false.
	want.TLSSkipVerify = false
	want.BFDKeyID = 0 // a key ID of its own
	if got := (conf.HealthCheck{}).Effective(); !reflect.DeepEqual(got, want) {
		t.Errorf("HealthCheck{}.Effective() =\n%+v\nwant\n%+v", got, want)
	}
	if (conf.HealthCheck{}).Enabled() || (conf.HealthCheck{Type: "none"}).Enabled() || !(conf.HealthCheck{Type: "tcp"}).Enabled() {
		t.Errorf("Enabled() wrong")
	}
}

func TestHealthLoadDefaultsAndOverride(t *testing.T) {
	text := `
ports:
  - name: s
    device: net_ring0
    address: 198.51.100.1/24
services:
  - protocol: tcp
    vip: 203.0.113.10
    port: 80
    sorry_server: 198.51.100.99:8080
    health:
      type: http
      interval: 5s
      path: /healthz
      expect_status: "200"
    servers:
      - address: 198.51.100.11
      - address: 198.51.100.12
        health:
          path: /ping
          fall: 5
          also:
            - {type: tcp, port: 22}
            - {type: exec, command: [/bin/true], timeout: 2s}
          extra_urls:
            - {path: /ready, expect_body: ready}
            - path: /db
              expect_status: 200-204
              expect_digest: 9b3a0c85a887a256d6939da88aabd8cd
      - address: 198.51.100.13
        forward: dr
        health:
          type: exec
          command: [/bin/true]
          target: vip
`
	c, err := conf.Parse([]byte(text))
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	s := c.Services[0]
	svc := conf.DefaultHealthCheck()
	svc.Type, svc.Interval, svc.Path, svc.ExpectStatus = "http", 5*time.Second, "/healthz", "200"
	if !reflect.DeepEqual(s.Health, svc) {
		t.Errorf("service health =\n%+v\nwant\n%+v", s.Health, svc)
	}
	if s.SorryServer != "198.51.100.99:8080" {
		t.Errorf("sorry_server = %q", s.SorryServer)
	}
	if ap, ok := s.SorryAddr(); !ok || ap != netip.MustParseAddrPort("198.51.100.99:8080") {
		t.Errorf("SorryAddr() = %v, %v", ap, ok)
	}
	if s.Servers[0].Health != nil {
		t.Errorf("servers[0].health = %+v, want nil (inherits)", s.Servers[0].Health)
	}
	if got := s.HealthFor(s.Servers[0]); !reflect.DeepEqual(got, svc) {
		t.Errorf("HealthFor(servers[0]) =\n%+v\nwant\n%+v", got, svc)
	}
	own := svc
	own.Path, own.Fall = "/ping", 5
	also := conf.DefaultHealthCheck()
	also.Type, also.Port = "tcp", 22
	also2 := conf.DefaultHealthCheck()
	also2.Type, also2.Command, also2.Timeout = "exec", []string{"/bin/true"}, 2*time.Second
	own.Also = []conf.HealthCheck{also, also2}
	own.ExtraURLs = []conf.HealthURL{{Path: "/ready", ExpectBody: "ready"},
		{Path: "/db", ExpectStatus: "200-204", ExpectDigest: "9b3a0c85a887a256d6939da88aabd8cd"}}
	if s.Servers[1].Health == nil || !reflect.DeepEqual(*s.Servers[1].Health, own) {
		t.Errorf("servers[1].health =\n%+v\nwant\n%+v", s.Servers[1].Health, own)
	}
	ex := svc
	ex.Type, ex.Command, ex.Target = "exec", []string{"/bin/true"}, "vip"
	if got := s.HealthFor(s.Servers[2]); !reflect.DeepEqual(got, ex) {
		t.Errorf("HealthFor(servers[2]) =\n%+v\nwant\n%+v", got, ex)
	}
}

func TestHealthLoadErrors(t *testing.T) {
	base := `
ports:
  - name: s
    device: net_ring0
    address: 198.51.100.1/24
services:
  - protocol: tcp
    vip: 203.0.113.10
    port: 80
`
	tests := []struct {
		name, text, want string
	}{
		{"unknown service health key", base + "    health: {type: tcp, intervall: 2s}\n",
			"services[0].health.intervall: unknown key"},
		{"unknown server health key", base + "    servers:\n      - address: 198.51.100.11\n        health: {pth: /}\n",
			"services[0].servers[0].health.pth: unknown key"},
		{"unknown extra_urls key", base + "    health: {type: http, extra_urls: [{pth: /x}]}\n",
			"services[0].health.extra_urls[0].pth: unknown key"},
		{"duration without unit", base + "    health: {type: tcp, interval: 2}\n",
			`services[0].health.interval: 2 has no unit (want e.g. "2s")`},
		{"inherited error reported at the service", base + "    health: {type: tcp, rise: 101}\n    servers:\n      - address: 198.51.100.11\n        health: {path: /x}\n",
			"services[0].health.rise: 101 is out of range 1..100"},
		{"server override error", base + "    health: {type: tcp}\n    servers:\n      - address: 198.51.100.11\n        health: {timeout: 3s}\n",
			"services[0].servers[0].health.timeout: 3s is not less than services[0].servers[0].health.interval 2s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := conf.Parse([]byte(tt.text))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse() = %v, want %s", err, tt.want)
			}
		})
	}
}

func TestHealthValidateValid(t *testing.T) {
	tests := []struct {
		name string
		edit func(*conf.Config)
	}{
		{"zero check (none)", func(*conf.Config) {}},
		{"http", func(c *conf.Config) {
			c.Services[0].Health = conf.HealthCheck{Type: "http", Interval: time.Second, Timeout: 500 * time.Millisecond,
				Path: "/healthz", Host: "www.example.com", ExpectStatus: "200,204,300-399", ExpectBody: "ok", Source: "192.0.2.1"}
		}},
		{"udp", func(c *conf.Config) {
			c.Services[0].Health = conf.HealthCheck{Type: "udp", Send: "ping", Expect: "pong"}
		}},
		{"exec", func(c *conf.Config) {
			c.Services[0].Health = conf.HealthCheck{Type: "exec", Command: []string{"/usr/bin/check", "-q"}}
		}},
		{"vip target on dr servers", func(c *conf.Config) {
			c.Services[1].Servers[0].Forward = "dr"
			c.Services[1].Health = conf.HealthCheck{Type: "tcp", Target: "vip"}
		}},
		{"vip target in a none check is unused", func(c *conf.Config) { c.Services[0].Health.Target = "vip" }},
		{"expire with slow start", func(c *conf.Config) {
			c.Services[0].Health = conf.HealthCheck{Type: "icmp", OnFailure: "expire", SlowStart: time.Hour}
		}},
		{"sorry server", func(c *conf.Config) { c.Services[0].SorryServer = "198.51.100.99:8080" }},
		{"bfd with a 20-byte sha1 key", func(c *conf.Config) {
			c.Services[0].Health = conf.HealthCheck{Type: "bfd", BFDAuth: "meticulous-keyed-sha1", BFDKeyID: 255, BFDPassword: strings.Repeat("k", 20)}
		}},
		{"bfd auth none", func(c *conf.Config) { c.Services[0].Health = conf.HealthCheck{Type: "bfd", BFDAuth: "none"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.edit(&c)
			if err := c.Validate(schedulers); err != nil {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}

func TestHealthValidateInvalid(t *testing.T) {
	h := func(c *conf.Config) *conf.HealthCheck {
		c.Services[0].Health.Type = "tcp"
		return &c.Services[0].Health
	}
	tests := []struct {
		name string
		edit func(*conf.Config)
		want string
	}{
		{"type", func(c *conf.Config) { h(c).Type = "ping" },
			`services[0].health.type: "ping" is not one of tcp, http, https, udp, dns, smtp, icmp, exec, file, bfd, none`},
		{"interval too short", func(c *conf.Config) { h(c).Interval = 50 * time.Millisecond },
			`services[0].health.interval: 50ms is out of range 100ms..1h`},
		{"interval negative", func(c *conf.Config) { h(c).Interval = -time.Second },
			`services[0].health.interval: -1s is out of range 100ms..1h`},
		{"timeout too short", func(c *conf.Config) { h(c).Timeout = time.Millisecond },
			`services[0].health.timeout: 1ms is out of range 10ms..1h`},
		{"timeout not less than interval", func(c *conf.Config) { h(c).Timeout = 2 * time.Second },
			`services[0].health.timeout: 2s is not less than services[0].health.interval 2s`},
		{"rise", func(c *conf.Config) { h(c).Rise = 101 }, `services[0].health.rise: 101 is out of range 1..100`},
		{"fall", func(c *conf.Config) { h(c).Fall = -1 }, `services[0].health.fall: -1 is out of range 1..100`},
		{"port", func(c *conf.Config) { h(c).Port = 65536 }, `services[0].health.port: 65536 is out of range 0..65535`},
		{"source", func(c *conf.Config) { h(c).Source = "eth0" }, `services[0].health.source: "eth0" is not an IPv4 address`},
		{"source loopback", func(c *conf.Config) { h(c).Source = "127.0.0.1" },
			`services[0].health.source: 127.0.0.1 is not a unicast host address`},
		{"target", func(c *conf.Config) { h(c).Target = "rs" }, `services[0].health.target: "rs" is not one of server, vip`},
		{"vip target on nat", func(c *conf.Config) { h(c).Target = "vip" },
			`services[0].health.target: vip needs dr or tun servers, services[0].servers[0] forwards by nat (its VIP is on the load balancer)`},
		{"vip target on one nat server's override", func(c *conf.Config) {
			c.Services[1].Servers[0].Health = &conf.HealthCheck{Type: "tcp", Target: "vip"}
		}, `services[1].servers[0].health.target: vip needs dr or tun servers, services[1].servers[0] forwards by nat (its VIP is on the load balancer)`},
		{"method", func(c *conf.Config) { h(c).Method = "get" },
			`services[0].health.method: "get" is not one of GET, HEAD, POST, OPTIONS`},
		{"path", func(c *conf.Config) { h(c).Path = "healthz" },
			`services[0].health.path: "healthz" is not a request path (want e.g. /healthz)`},
		{"host", func(c *conf.Config) { h(c).Host = "a b" }, `services[0].health.host: "a b" is not a host name`},
		{"expect_digest short", func(c *conf.Config) { h(c).ExpectDigest = "9b3a0c85a887a256d6939da88aabd8c" },
			`services[0].health.expect_digest: "9b3a0c85a887a256d6939da88aabd8c" is not an MD5 digest: want 32 hex digits (keepalived's genhash prints it)`},
		{"expect_digest not hex", func(c *conf.Config) { h(c).ExpectDigest = strings.Repeat("g", 32) },
			`services[0].health.expect_digest: "` + strings.Repeat("g", 32) + `" is not an MD5 digest: want 32 hex digits (keepalived's genhash prints it)`},
		{"expect_regex", func(c *conf.Config) { x := h(c); x.Type, x.ExpectRegex = "http", "ok(" },
			"services[0].health.expect_regex: \"ok(\" is not a regular expression (Go's RE2 syntax): error parsing regexp: missing closing ): `ok(`"},
		{"expect_regex on udp", func(c *conf.Config) { x := h(c); x.Type, x.Send, x.ExpectRegex = "udp", "x", "ok" },
			`services[0].health.expect_regex: only an http or https check reads a body (type is udp)`},
		{"expect_digest on tcp", func(c *conf.Config) { h(c).ExpectDigest = strings.Repeat("0", 32) },
			`services[0].health.expect_digest: only an http or https check reads a body (type is tcp)`},
		{"expect_status word", func(c *conf.Config) { h(c).ExpectStatus = "ok" },
			`services[0].health.expect_status: "ok" is not a status code (want e.g. "200-399")`},
		{"expect_status range", func(c *conf.Config) { h(c).ExpectStatus = "200-x" },
			`services[0].health.expect_status: "200-x" is not a status code range (want e.g. "200-399")`},
		{"expect_status out of range", func(c *conf.Config) { h(c).ExpectStatus = "200,600" },
			`services[0].health.expect_status: "600" is not a status code or range in 100..599 (want e.g. "200-399")`},
		{"expect_status reversed", func(c *conf.Config) { h(c).ExpectStatus = "399-200" },
			`services[0].health.expect_status: "399-200" is not a status code or range in 100..599 (want e.g. "200-399")`},
		{"udp without send", func(c *conf.Config) { h(c).Type = "udp" },
			`services[0].health.send: must not be empty for a udp check`},
		{"exec without command", func(c *conf.Config) { h(c).Type = "exec" },
			`services[0].health.command: must not be empty for an exec check`},
		{"exec relative", func(c *conf.Config) { h(c).Type = "exec"; h(c).Command = []string{"check"} },
			`services[0].health.command[0]: "check" is not an absolute path`},
		{"exec empty arg", func(c *conf.Config) { h(c).Type = "exec"; h(c).Command = []string{"/bin/check", ""} },
			`services[0].health.command[1]: must not be empty`},
		{"on_failure", func(c *conf.Config) { h(c).OnFailure = "drop" },
			`services[0].health.on_failure: "drop" is not one of keep, expire`},
		{"slow_start", func(c *conf.Config) { h(c).SlowStart = 2 * time.Hour },
			`services[0].health.slow_start: 2h0m0s is out of range 0s..1h`},
		{"server override", func(c *conf.Config) { c.Services[0].Servers[1].Health = &conf.HealthCheck{Type: "https", Rise: 1000} },
			`services[0].servers[1].health.rise: 1000 is out of range 1..100`},
		{"sorry not addr:port", func(c *conf.Config) { c.Services[0].SorryServer = "198.51.100.99" },
			`services[0].sorry_server: "198.51.100.99" is not an IPv4 address:port (want e.g. 198.51.100.99:80)`},
		{"sorry port 0", func(c *conf.Config) { c.Services[0].SorryServer = "198.51.100.99:0" },
			`services[0].sorry_server: port 0 is out of range 1..65535`},
		{"sorry multicast", func(c *conf.Config) { c.Services[0].SorryServer = "224.0.0.1:80" },
			`services[0].sorry_server: 224.0.0.1 is not a unicast host address`},
		{"sorry is the vip", func(c *conf.Config) { c.Services[0].SorryServer = "203.0.113.10:8080" },
			`services[0].sorry_server: 203.0.113.10 is the service's VIP`},
		{"sorry is a port", func(c *conf.Config) { c.Services[0].SorryServer = "198.51.100.1:80" },
			`services[0].sorry_server: 198.51.100.1 is the address of ports[1]`},
		{"sorry unreachable", func(c *conf.Config) { c.Services[0].SorryServer = "192.0.2.9:80" },
			`services[0].sorry_server: 192.0.2.9 is not on any server-facing port's subnet (198.51.100.0/24)`},
		{"retry_interval", func(c *conf.Config) { h(c).RetryInterval = 10 * time.Millisecond },
			`services[0].health.retry_interval: 10ms is out of range 0 or 100ms..1h`},
		{"dns type", func(c *conf.Config) { h(c).Type, h(c).DNSType = "dns", "ANY" },
			`services[0].health.dns_type: "ANY" is not one of A, AAAA, NS, CNAME, SOA, MX, TXT`},
		{"dns name", func(c *conf.Config) { h(c).Type, h(c).DNSName = "dns", "a..example" },
			`services[0].health.dns_name: "a..example" is not a domain name: label "" (1..63 printable bytes each)`},
		{"helo_name on tcp", func(c *conf.Config) { h(c).Type, h(c).HeloName = "tcp", "lb1.example.com" },
			`services[0].health.helo_name: only an smtp check says HELO (type is tcp)`},
		{"helo_name with a space", func(c *conf.Config) { h(c).Type, h(c).HeloName = "smtp", "lb1 example" },
			`services[0].health.helo_name: "lb1 example" is not a domain name: label "lb1 example" (1..63 printable bytes each)`},
		{"helo_name the root", func(c *conf.Config) { h(c).Type, h(c).HeloName = "smtp", "." },
			`services[0].health.helo_name: the root "." is no name to say HELO with`},
		{"also without a type", func(c *conf.Config) { h(c).Type, h(c).Also = "tcp", []conf.HealthCheck{{Port: 22}} },
			`services[0].health.also[0].type: an also check needs a type`},
		{"also nested", func(c *conf.Config) {
			h(c).Type, h(c).Also = "tcp", []conf.HealthCheck{{Type: "tcp", Also: []conf.HealthCheck{{Type: "icmp"}}}}
		}, `services[0].health.also[0].also: also checks do not nest: list them all in services[0].health.also`},
		{"also with a rise", func(c *conf.Config) { h(c).Type, h(c).Also = "tcp", []conf.HealthCheck{{Type: "icmp", Rise: 5}} },
			`services[0].health.also[0]: an also check is probed with services[0].health: its interval, rise, fall and retry_interval are that check's`},
		{"also starting down", func(c *conf.Config) {
			h(c).Type, h(c).Also = "tcp", []conf.HealthCheck{{Type: "icmp", StartDown: true}}
		},
			`services[0].health.also[0]: start_down, passive, weight_from_exit, slow_start and on_failure are the server's: set them in services[0].health`},
		{"also through lbd, as its check", func(c *conf.Config) {
			h(c).Type, h(c).Via, h(c).Also = "tcp", "lbd", []conf.HealthCheck{{Type: "dns"}}
		},
			`services[0].health.also[0].via: lbd sends TCP, HTTP, UDP and ICMP probes only (type is dns)`},
		{"also through lbd, its own", func(c *conf.Config) {
			h(c).Type, h(c).Also = "tcp", []conf.HealthCheck{{Type: "http", Via: "lbd", ExpectBody: "ok"}}
		},
			`services[0].health.also[0].expect_body: an HTTP check through lbd reads the status line only (via: lbd)`},
		{"also's own settings", func(c *conf.Config) { h(c).Type, h(c).Also = "tcp", []conf.HealthCheck{{Type: "udp"}} },
			`services[0].health.also[0].send: must not be empty for a udp check`},
		{"also's timeouts", func(c *conf.Config) {
			h(c).Type, h(c).Also = "tcp", []conf.HealthCheck{{Type: "icmp", Timeout: 500 * time.Millisecond}, {Type: "tcp", Port: 22, Timeout: 600 * time.Millisecond}}
		}, `services[0].health.also: the check's and its also checks' timeouts add up to 2.1s, not less than services[0].health.interval 2s`},
		{"extra_urls on tcp", func(c *conf.Config) { h(c).Type, h(c).ExtraURLs = "tcp", []conf.HealthURL{{Path: "/ready"}} },
			`services[0].health.extra_urls: only an http or https check requests URLs (type is tcp)`},
		{"extra_urls path", func(c *conf.Config) {
			h(c).Type, h(c).ExtraURLs = "http", []conf.HealthURL{{Path: "/ok"}, {Path: "ready"}}
		},
			`services[0].health.extra_urls[1].path: "ready" is not a request path (want e.g. /healthz)`},
		{"extra_urls status", func(c *conf.Config) {
			h(c).Type, h(c).ExtraURLs = "http", []conf.HealthURL{{Path: "/ok", ExpectStatus: "2xx"}}
		},
			`services[0].health.extra_urls[0].expect_status: "2xx" is not a status code (want e.g. "200-399")`},
		{"extra_urls regex", func(c *conf.Config) {
			h(c).Type, h(c).ExtraURLs = "http", []conf.HealthURL{{Path: "/ok", ExpectRegex: "("}}
		},
			"services[0].health.extra_urls[0].expect_regex: \"(\" is not a regular expression (Go's RE2 syntax): error parsing regexp: missing closing ): `(`"},
		{"extra_urls digest", func(c *conf.Config) {
			h(c).Type, h(c).ExtraURLs = "http", []conf.HealthURL{{Path: "/ok", ExpectDigest: "abc"}}
		},
			`services[0].health.extra_urls[0].expect_digest: "abc" is not an MD5 digest: want 32 hex digits (keepalived's genhash prints it)`},
		{"weight_from_exit on tcp", func(c *conf.Config) { h(c).Type, h(c).WeightFromExit = "tcp", true },
			`services[0].health.weight_from_exit: only an exec check has an exit status (type is tcp)`},
		{"file without a path", func(c *conf.Config) { h(c).Type = "file" },
			`services[0].health.file: must not be empty for a file check`},
		{"file relative", func(c *conf.Config) { h(c).Type, h(c).File = "file", "run/rs1" },
			`services[0].health.file: "run/rs1" is not an absolute path`},
		{"file a directory", func(c *conf.Config) { h(c).Type, h(c).File = "file", "/run/" },
			`services[0].health.file: "/run/" names a directory, not a file`},
		{"file_weight range", func(c *conf.Config) { h(c).Type, h(c).File, h(c).FileWeight = "file", "/run/rs1", 65536 },
			`services[0].health.file_weight: 65536 is out of range -65535..65535`},
		{"file on tcp", func(c *conf.Config) { h(c).Type, h(c).File = "tcp", "/run/rs1" },
			`services[0].health.file: only a file check reads a file (type is tcp)`},
		{"file_weight on exec", func(c *conf.Config) { h(c).Type, h(c).Command, h(c).FileWeight = "exec", []string{"/bin/true"}, 2 },
			`services[0].health.file_weight: only a file check reads a file (type is exec)`},
		{"file via lbd", func(c *conf.Config) { h(c).Type, h(c).File, h(c).Via = "file", "/run/rs1", "lbd" },
			`services[0].health.via: lbd sends TCP, HTTP, UDP and ICMP probes only (type is file)`},
		{"extra_urls body via lbd", func(c *conf.Config) {
			h(c).Type, h(c).Via, h(c).ExtraURLs = "http", "lbd", []conf.HealthURL{{Path: "/ready", ExpectBody: "ok"}}
		}, `services[0].health.extra_urls[0].expect_body: an HTTP check through lbd reads the status line only (via: lbd)`},
		{"extra_urls path via lbd", func(c *conf.Config) {
			h(c).Type, h(c).Via, h(c).ExtraURLs = "http", "lbd", []conf.HealthURL{{Path: "/" + strings.Repeat("a", 900)}}
		}, `services[0].health.extra_urls[0].path: path and host of an HTTP check through lbd are 901 bytes, at most 900 (via: lbd: one segment)`},
		{"bfd_interval", func(c *conf.Config) { h(c).Type, h(c).BFDInterval = "bfd", 5*time.Millisecond },
			`services[0].health.bfd_interval: 5ms is out of range 10ms..10s`},
		{"bfd_multiplier", func(c *conf.Config) { h(c).Type, h(c).BFDMultiplier = "bfd", 256 },
			`services[0].health.bfd_multiplier: 256 is out of range 1..255`},
		{"bfd_auth unknown", func(c *conf.Config) { h(c).Type, h(c).BFDAuth, h(c).BFDPassword = "bfd", "md5", "k" },
			`services[0].health.bfd_auth: "md5" is not one of none, simple, keyed-md5, meticulous-keyed-md5, keyed-sha1, meticulous-keyed-sha1`},
		{"bfd_auth without a password", func(c *conf.Config) { h(c).Type, h(c).BFDAuth = "bfd", "keyed-sha1" },
			`services[0].health.bfd_password: must be 1..20 bytes for bfd_auth keyed-sha1 (it has 0)`},
		{"bfd md5 key too long", func(c *conf.Config) {
			h(c).Type, h(c).BFDAuth, h(c).BFDPassword = "bfd", "keyed-md5", strings.Repeat("k", 17)
		}, `services[0].health.bfd_password: must be 1..16 bytes for bfd_auth keyed-md5 (it has 17)`},
		{"bfd password without auth", func(c *conf.Config) { h(c).Type, h(c).BFDPassword = "bfd", "k" },
			`services[0].health.bfd_password: is set but bfd_auth is none (say which authentication it is for)`},
		{"bfd_key_id", func(c *conf.Config) {
			h(c).Type, h(c).BFDAuth, h(c).BFDPassword, h(c).BFDKeyID = "bfd", "simple", "k", 256
		},
			`services[0].health.bfd_key_id: 256 is out of range 0..255`},
		{"bfd to the vip", func(c *conf.Config) { h(c).Type, h(c).Target = "bfd", "vip" },
			`services[0].health.target: a BFD session is with the server's own address, not the VIP`},
		{"start_down unchecked", func(c *conf.Config) { h(c).Type, h(c).StartDown = "none", true },
			`services[0].health.start_down: needs a check type: a server that starts down comes up when its probes pass`},
		{"quorum negative", func(c *conf.Config) { c.Services[0].Quorum = -1 },
			`services[0].quorum: -1 is out of range 0..1000000`},
		{"hysteresis at the quorum", func(c *conf.Config) { c.Services[0].Quorum, c.Services[0].Hysteresis = 3, 3 },
			`services[0].hysteresis: 3 is out of range 0..2: below the quorum 3 (the quorum would never be lost)`},
		{"hysteresis with the default quorum", func(c *conf.Config) { c.Services[0].Hysteresis = 1 },
			`services[0].hysteresis: 1 is out of range 0..0: below the quorum 1 (the quorum would never be lost)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.edit(&c)
			err := c.Validate(schedulers)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Validate() =\n%v\nwant\n%s", err, tt.want)
			}
			var fe *conf.FieldError
			if !errors.As(err, &fe) {
				t.Errorf("Validate() error %T is not a *conf.FieldError", err)
			}
		})
	}
}

func TestStatusOK(t *testing.T) {
	tests := []struct {
		expect string
		code   int
		want   bool
	}{
		{"", 200, true}, {"", 399, true}, {"", 400, false}, {"", 199, false},
		{"200", 200, true}, {"200", 201, false},
		{"200-299, 404", 404, true}, {"200-299, 404", 403, false}, {"200-299, 404", 250, true},
		{"bogus", 200, false},
	}
	for _, tt := range tests {
		if got := (conf.HealthCheck{ExpectStatus: tt.expect}).StatusOK(tt.code); got != tt.want {
			t.Errorf("StatusOK(%q, %d) = %v, want %v", tt.expect, tt.code, got, tt.want)
		}
	}
}

func TestHealthVia(t *testing.T) {
	for _, tc := range []struct {
		h    conf.HealthCheck
		want string
	}{
		{conf.HealthCheck{Type: "tcp", Via: "lbd"}, ""},
		{conf.HealthCheck{Type: "tcp", Via: "host"}, ""},
		{conf.HealthCheck{Type: "http", Via: "lbd"}, ""},
		{conf.HealthCheck{Type: "http", Via: "lbd", Path: "/health", Host: "www.example.com", ExpectStatus: "200,204"}, ""},
		{conf.HealthCheck{Type: "http", Via: "lbd", Path: "/a b"}, `services[0].health.path: "/a b" has a space or control character at byte 2 (via: lbd sends it as it is)`},
		{conf.HealthCheck{Type: "http", Via: "lbd", Host: "x\r\nX-Evil: 1"}, `services[0].health.host: "x\r\nX-Evil: 1" has a space or control character at byte 1 (via: lbd sends it as it is)`},
		{conf.HealthCheck{Type: "http", Via: "lbd", ExpectBody: "ok"}, "services[0].health.expect_body: an HTTP check through lbd reads the status line only (via: lbd)"},
		{conf.HealthCheck{Type: "http", Via: "lbd", ExpectDigest: strings.Repeat("0", 32)}, "services[0].health.expect_digest: an HTTP check through lbd reads the status line only, not the body it would digest (via: lbd)"},
		{conf.HealthCheck{Type: "http", Via: "host", ExpectDigest: strings.Repeat("A", 32)}, ""},
		{conf.HealthCheck{Type: "http", Via: "lbd", ExpectRegex: "ok"}, "services[0].health.expect_regex: an HTTP check through lbd reads the status line only (via: lbd)"},
		{conf.HealthCheck{Type: "http", Via: "lbd", Path: "/" + strings.Repeat("a", 900)}, "services[0].health.path: path and host of an HTTP check through lbd are 901 bytes, at most 900 (via: lbd: one segment)"},
		{conf.HealthCheck{Type: "https", Via: "lbd"}, "services[0].health.via: lbd sends TCP, HTTP, UDP and ICMP probes only (type is https)"},
		{conf.HealthCheck{Type: "icmp", Via: "lbd"}, ""},
		{conf.HealthCheck{Type: "exec", Via: "lbd", Command: []string{"/bin/true"}}, "services[0].health.via: lbd sends TCP, HTTP, UDP and ICMP probes only (type is exec)"},
		{conf.HealthCheck{Type: "udp", Via: "lbd", Send: "x", Expect: "ok"}, ""},
		{conf.HealthCheck{Type: "udp", Via: "lbd", Send: "x", Expect: strings.Repeat("e", 65)}, "services[0].health.expect: a UDP check through lbd searches the first 64 bytes of the reply: 65 bytes cannot be found there (via: lbd)"},
		{conf.HealthCheck{Type: "udp", Via: "lbd", Send: strings.Repeat("s", 1025)}, "services[0].health.send: a UDP check through lbd sends at most 1024 bytes, not 1025 (via: lbd)"},
		{conf.HealthCheck{Type: "tcp", Via: "kernel"}, `services[0].health.via: "kernel" is not one of host, lbd`},
	} {
		c := validConfig()
		c.Services[0].Health = tc.h
		err := c.Validate(nil)
		if (err == nil) != (tc.want == "") || err != nil && err.Error() != tc.want {
			t.Errorf("via %q type %q: got %v, want %q", tc.h.Via, tc.h.Type, err, tc.want)
		}
	}
}
