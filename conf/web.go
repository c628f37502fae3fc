package conf

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Web configures the browser console: an HTTPS server with a login form,
// served by lbd itself. It is off unless Listen is set, because it can edit
// the services: an operator turns it on knowingly, with users configured.
type Web struct {
	Listen          string        `mapstructure:"listen"`           // host:port of the HTTPS console, "" disables it; default "" (off); reload: restart
	CertFile        string        `mapstructure:"cert_file"`        // PEM certificate (chain) to serve, "" = a self-signed one kept in tls_dir; default ""; reload: restart
	KeyFile         string        `mapstructure:"key_file"`         // PEM private key of cert_file, required with it; default ""; reload: restart
	TLSDir          string        `mapstructure:"tls_dir"`          // absolute directory where the self-signed certificate and key are generated at first start and reused; default "/var/lib/dplb/web"; reload: restart
	Users           []WebUser     `mapstructure:"users"`            // who may log in; default none; reload: restart
	UsersFile       string        `mapstructure:"users_file"`       // file of more users, one "name:role:hash" a line, "#" comments; default ""; reload: restart
	SessionLifetime time.Duration `mapstructure:"session_lifetime"` // a login lasts this long, 1m..720h; default 8h; reload: restart
	ClientCAFile    string        `mapstructure:"client_ca_file"`   // PEM CA certificates: a browser presenting a client certificate they signed, whose common name is a user, is logged in as that user without a password; "" = passwords only; default ""; reload: restart
}

// WebUser is one account of the console.
type WebUser struct {
	Name         string `mapstructure:"name"`          // login name, [A-Za-z0-9._@-]{1,64}, unique; required
	Role         string `mapstructure:"role"`          // "viewer" (read only) or "admin" (may edit); required
	PasswordHash string `mapstructure:"password_hash"` // bcrypt ("$2b$...", e.g. from lbd -hash-password) or argon2id PHC string ("$argon2id$v=19$m=...,t=...,p=...$salt$hash"); required, except "" = client certificate only (with client_ca_file)
}

// Roles of the console's users.
const (
	RoleViewer = "viewer"
	RoleAdmin  = "admin"
)

const (
	defaultWebTLSDir  = "/var/lib/dplb/web"
	defaultWebSession = 8 * time.Hour
)

var (
	webUserRE  = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)
	bcryptRE   = regexp.MustCompile(`^\$2[aby]\$[0-9]{2}\$[./A-Za-z0-9]{53}$`)
	argon2idRE = regexp.MustCompile(`^\$argon2id\$v=19\$m=[0-9]+,t=[0-9]+,p=[0-9]+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$`)
)

// IsPasswordHash reports whether h is written as a bcrypt or an argon2id
// hash (its parameters are checked when a password is verified).
func IsPasswordHash(h string) bool { return bcryptRE.MatchString(h) || argon2idRE.MatchString(h) }

// AllUsers returns Users followed by the users of UsersFile.
func (w Web) AllUsers() ([]WebUser, error) {
	users := append([]WebUser(nil), w.Users...)
	if w.UsersFile == "" {
		return users, nil
	}
	more, err := ReadWebUsers(w.UsersFile, w.ClientCAFile != "")
	if err != nil {
		return nil, err
	}
	return append(users, more...), nil
}

// ReadWebUsers reads a users file: "name:role:hash" lines; blank lines and
// lines starting with "#" are skipped. Errors name the file and line. An
// empty hash is allowed when certs (web.client_ca_file is set).
func ReadWebUsers(path string, certs bool) ([]WebUser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &FieldError{Field: "web.users_file", Msg: err.Error(), Err: err}
	}
	defer f.Close()
	var users []WebUser
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, ":")
		if len(parts) != 3 {
			return nil, fieldErrorf("web.users_file", "%s:%d: want name:role:hash", path, n)
		}
		u := WebUser{Name: parts[0], Role: parts[1], PasswordHash: parts[2]}
		if err := u.validate(fmt.Sprintf("web.users_file %s:%d", path, n), certs); err != nil {
			return nil, err
		}
		users = append(users, u)
	}
	if err := sc.Err(); err != nil {
		return nil, &FieldError{Field: "web.users_file", Msg: err.Error(), Err: err}
	}
	return users, nil
}

func (u WebUser) validate(f string, certs bool) error {
	switch {
	case !webUserRE.MatchString(u.Name):
		return fieldErrorf(f+".name", "%q is not a user name ([A-Za-z0-9._@-], 1 to 64 characters)", u.Name)
	case u.Role != RoleViewer && u.Role != RoleAdmin:
		return fieldErrorf(f+".role", "%q is not %q or %q", u.Role, RoleViewer, RoleAdmin)
	case u.PasswordHash == "" && !certs:
		return fieldErrorf(f+".password_hash", "required (empty only with web.client_ca_file: the user then logs in by certificate)")
	case u.PasswordHash != "" && !IsPasswordHash(u.PasswordHash):
		return fieldErrorf(f+".password_hash", "not a bcrypt or argon2id hash (make one with lbd -hash-password)")
	}
	return nil
}

func (w Web) validate() error {
	if w.Listen == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(w.Listen)
	if err != nil {
		return fieldErrorf("web.listen", "%q is not host:port (want e.g. 127.0.0.1:9443)", w.Listen)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fieldErrorf("web.listen", "port %q is not a number in 1..65535", port)
	}
	switch {
	case w.CertFile != "" && w.KeyFile == "":
		return fieldErrorf("web.key_file", "required with web.cert_file")
	case w.CertFile == "" && w.KeyFile != "":
		return fieldErrorf("web.cert_file", "required with web.key_file")
	case w.CertFile == "" && !filepath.IsAbs(w.TLSDir):
		return fieldErrorf("web.tls_dir", "%q is not an absolute path (needed for the self-signed certificate without web.cert_file)", w.TLSDir)
	}
	if err := checkDuration("web.session_lifetime", w.SessionLifetime, time.Minute, 720*time.Hour, "1m..720h"); err != nil {
		return err
	}
	for i, u := range w.Users {
		if err := u.validate(fmt.Sprintf("web.users[%d]", i), w.ClientCAFile != ""); err != nil {
			return err
		}
	}
	users, err := w.AllUsers()
	if err != nil {
		return err
	}
	if len(users) == 0 {
		return fieldErrorf("web.users", "no users: give web.users or web.users_file, or leave web.listen empty")
	}
	seen := map[string]bool{}
	for _, u := range users {
		if seen[u.Name] {
			return fieldErrorf("web.users", "user %q is given twice", u.Name)
		}
		seen[u.Name] = true
	}
	return nil
}
