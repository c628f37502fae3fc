package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"

	"github.com/dplb/dplb/conf"
)

// account is a user who may log in.
type account struct {
	role string
	hash string
}

// dummyHash is compared against when the user is unknown, so that a
// failed login takes as long whether or not the name exists.
var dummyHash = mustBcrypt("not a password")

func mustBcrypt(pw string) string {
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		panic(err)
	}
	return string(h)
}

// HashPassword returns a bcrypt hash of pw for a users list (lbd
// -hash-password prints one).
func HashPassword(pw string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
	return string(h), err
}

// verifyPassword checks pw against a bcrypt or argon2id (PHC string) hash.
func verifyPassword(hash, pw string) bool {
	if strings.HasPrefix(hash, "$argon2id$") {
		ok, err := verifyArgon2id(hash, pw)
		return err == nil && ok
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw)) == nil
}

// verifyArgon2id checks "$argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt>$<key>"
// (unpadded standard base64), as the reference argon2 tool writes it.
func verifyArgon2id(hash, pw string) (bool, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != "v=19" {
		return false, errors.New("not an argon2id v=19 hash")
	}
	var m, t, p uint64
	for _, kv := range strings.Split(parts[3], ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return false, err
		}
		switch k {
		case "m":
			m = n
		case "t":
			t = n
		case "p":
			p = n
		}
	}
	if m == 0 || t == 0 || p == 0 || p > 255 || m > 4<<20 {
		return false, errors.New("argon2id parameters out of range")
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return false, err
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false, errors.New("bad argon2id key")
	}
	got := argon2.IDKey([]byte(pw), salt, uint32(t), uint32(m), uint8(p), uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// session is one logged-in browser.
type session struct {
	user    string
	role    string
	csrf    string // must accompany every edit
	expires time.Time
}

// sessions are kept in memory: a restart of lbd logs everybody out.
type sessions struct {
	mu       sync.Mutex
	byToken  map[string]*session
	lifetime time.Duration
	now      func() time.Time
}

func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) create(user, role string) (string, *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok := newToken()
	ses := &session{user: user, role: role, csrf: newToken(), expires: s.now().Add(s.lifetime)}
	s.byToken[tok] = ses
	return tok, ses
}

// get returns the live session of tok, forgetting it if it has expired.
func (s *sessions) get(tok string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ses, ok := s.byToken[tok]
	if !ok {
		return session{}, false
	}
	if !s.now().Before(ses.expires) {
		delete(s.byToken, tok)
		return session{}, false
	}
	return *ses, true
}

func (s *sessions) remove(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byToken, tok)
}

// sweep forgets expired sessions.
func (s *sessions) sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for tok, ses := range s.byToken {
		if !now.Before(ses.expires) {
			delete(s.byToken, tok)
		}
	}
}

// loginLimiter refuses logins from an address that failed too often
// recently, before the password is even checked: guessing stays slow.
type loginLimiter struct {
	mu     sync.Mutex
	fails  map[string][]time.Time // by client address, oldest first
	max    int
	window time.Duration
	now    func() time.Time
}

// wait returns how long addr must wait before it may try again (0: now).
func (l *loginLimiter) wait(addr string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	recent := l.prune(addr)
	if len(recent) < l.max {
		return 0
	}
	return recent[0].Add(l.window).Sub(l.now())
}

func (l *loginLimiter) prune(addr string) []time.Time {
	cut := l.now().Add(-l.window)
	ts := l.fails[addr]
	i := 0
	for i < len(ts) && !ts[i].After(cut) {
		i++
	}
	ts = ts[i:]
	if len(ts) == 0 {
		delete(l.fails, addr)
	} else {
		l.fails[addr] = ts
	}
	return ts
}

// sweep forgets the addresses whose failures are all old.
func (l *loginLimiter) sweep() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for addr := range l.fails {
		l.prune(addr)
	}
}

func (l *loginLimiter) failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fails[addr] = append(l.prune(addr), l.now())
}

func (l *loginLimiter) succeeded(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.fails, addr)
}

// accounts indexes users by name.
func accounts(users []conf.WebUser) (map[string]account, error) {
	out := map[string]account{}
	for _, u := range users {
		if _, dup := out[u.Name]; dup {
			return nil, errors.New("web.users: user " + strconv.Quote(u.Name) + " is given twice")
		}
		out[u.Name] = account{role: u.Role, hash: u.PasswordHash}
	}
	return out, nil
}
