package conf_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dplb/dplb/conf"
)

// A bcrypt hash of "secret" (cost 4) and an argon2id one, for the syntax checks.
const (
	testBcrypt   = "$2a$04$fY7ldx.ZPcW2uaQ.oyZk6eLYl/7mXOd6.m8Dg1p.fYdS2vSg1w/Ia"
	testArgon2id = "$argon2id$v=19$m=65536,t=1,p=2$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2g"
)

func webConfig() conf.Config {
	c := validConfig()
	c.Web.Listen = "127.0.0.1:9443"
	c.Web.Users = []conf.WebUser{{Name: "alice", Role: "admin", PasswordHash: testBcrypt}}
	return c
}

func TestWebValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*conf.Config)
	}{
		{"off needs nothing", func(c *conf.Config) { c.Web = conf.Default().Web; c.Web.TLSDir = "relative" }},
		{"self-signed", func(*conf.Config) {}},
		{"cert and key", func(c *conf.Config) { c.Web.CertFile, c.Web.KeyFile, c.Web.TLSDir = "/c.pem", "/k.pem", "" }},
		{"argon2id viewer", func(c *conf.Config) {
			c.Web.Users = append(c.Web.Users, conf.WebUser{Name: "bob", Role: "viewer", PasswordHash: testArgon2id})
		}},
		{"bounds of session lifetime", func(c *conf.Config) { c.Web.SessionLifetime = time.Minute }},
		{"certificate-only user", func(c *conf.Config) {
			c.Web.ClientCAFile = "/etc/dplb/ca.pem"
			c.Web.Users = append(c.Web.Users, conf.WebUser{Name: "carol", Role: "admin"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := webConfig()
			tc.edit(&c)
			if err := c.Validate(schedulers); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
		})
	}
}

func TestWebInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*conf.Config)
		want string
	}{
		{"listen not host:port", func(c *conf.Config) { c.Web.Listen = "9443" },
			`web.listen: "9443" is not host:port (want e.g. 127.0.0.1:9443)`},
		{"listen port 0", func(c *conf.Config) { c.Web.Listen = "127.0.0.1:0" },
			`web.listen: port "0" is not a number in 1..65535`},
		{"cert without key", func(c *conf.Config) { c.Web.CertFile = "/c.pem" },
			`web.key_file: required with web.cert_file`},
		{"key without cert", func(c *conf.Config) { c.Web.KeyFile = "/k.pem" },
			`web.cert_file: required with web.key_file`},
		{"relative tls_dir", func(c *conf.Config) { c.Web.TLSDir = "web" },
			`web.tls_dir: "web" is not an absolute path (needed for the self-signed certificate without web.cert_file)`},
		{"session too short", func(c *conf.Config) { c.Web.SessionLifetime = time.Second },
			`web.session_lifetime: 1s is out of range 1m..720h`},
		{"no users", func(c *conf.Config) { c.Web.Users = nil },
			`web.users: no users: give web.users or web.users_file, or leave web.listen empty`},
		{"bad name", func(c *conf.Config) { c.Web.Users[0].Name = "a b" },
			`web.users[0].name: "a b" is not a user name ([A-Za-z0-9._@-], 1 to 64 characters)`},
		{"bad role", func(c *conf.Config) { c.Web.Users[0].Role = "root" },
			`web.users[0].role: "root" is not "viewer" or "admin"`},
		{"plain password", func(c *conf.Config) { c.Web.Users[0].PasswordHash = "secret" },
			`web.users[0].password_hash: not a bcrypt or argon2id hash (make one with lbd -hash-password)`},
		{"no hash without client certificates", func(c *conf.Config) { c.Web.Users[0].PasswordHash = "" },
			`web.users[0].password_hash: required (empty only with web.client_ca_file: the user then logs in by certificate)`},
		{"twice", func(c *conf.Config) { c.Web.Users = append(c.Web.Users, c.Web.Users[0]) },
			`web.users: user "alice" is given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := webConfig()
			tc.edit(&c)
			err := c.Validate(schedulers)
			var fe *conf.FieldError
			if err == nil || err.Error() != tc.want || !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v, want the field error %s", err, tc.want)
			}
		})
	}
}

func TestWebUsersFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("# console users\n\nbob:viewer:" + testArgon2id + "\n")
	c := webConfig()
	c.Web.UsersFile = path
	if err := c.Validate(schedulers); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	users, err := c.Web.AllUsers()
	if err != nil || len(users) != 2 || users[1].Name != "bob" || users[1].Role != "viewer" {
		t.Fatalf("AllUsers() = %+v, %v; want alice and bob", users, err)
	}
	for _, tc := range []struct{ text, want string }{
		{"bob:viewer\n", "web.users_file: " + path + ":1: want name:role:hash"},
		{"#\nbob:boss:" + testBcrypt + "\n", "web.users_file " + path + `:2.role: "boss" is not "viewer" or "admin"`},
		{"alice:viewer:" + testBcrypt + "\n", `web.users: user "alice" is given twice`},
	} {
		write(tc.text)
		if err := c.Validate(schedulers); err == nil || err.Error() != tc.want {
			t.Errorf("users file %q: Validate() = %v, want %s", tc.text, err, tc.want)
		}
	}
	c.Web.UsersFile = filepath.Join(t.TempDir(), "missing")
	if err := c.Validate(schedulers); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing users file: Validate() = %v, want a not-exist error", err)
	}
}

func TestWebLoad(t *testing.T) {
	c, err := conf.Parse([]byte(`
ports: [{name: wan, device: net_null0, address: 192.0.2.1/24}]
web:
  listen: 127.0.0.1:9443
  session_lifetime: 30m
  users:
    - {name: alice, role: admin, password_hash: "` + testBcrypt + `"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Web.SessionLifetime != 30*time.Minute || c.Web.TLSDir != "/var/lib/dplb/web" || len(c.Web.Users) != 1 || c.Web.Users[0].Role != "admin" {
		t.Errorf("web = %+v", c.Web)
	}
	if _, err := conf.Parse([]byte("ports: [{name: wan, device: net_null0, address: 192.0.2.1/24}]\nweb: {users: [{name: a, rol: admin}]}\n")); err == nil || err.Error() != "web.users[0].rol: unknown key" {
		t.Errorf("misspelt key: %v", err)
	}
}
