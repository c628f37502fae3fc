package bfd

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// signed is a Down packet of the server's signed by a with seq.
func signed(a Auth, seq uint32) (Packet, []byte) {
	p := Packet{State: Down, DetectMult: 3, MyDisc: 9, Auth: true}
	b := p.Append(nil)
	b[3] = byte(PacketLen + a.sectionLen())
	b = a.sign(b, seq)
	got, err := Parse(b)
	if err != nil {
		panic(err)
	}
	return got, b
}

// TestAuthSignVerify: each type's packets pass the check of a session
// with the same settings and fail, saying why, with another key, key ID
// or type, tampered, replayed or out of the sequence window, and
// without authentication where it is expected, or with it where not.
func TestAuthSignVerify(t *testing.T) {
	now := time.Now()
	for name, typ := range AuthTypes {
		if typ == AuthNone {
			continue
		}
		a := Auth{Type: typ, KeyID: 7, Key: "s3cret"}
		t.Run(name, func(t *testing.T) {
			var r rcvAuth
			p, b := signed(a, 100)
			if len(b) != PacketLen+a.sectionLen() || int(b[3]) != len(b) {
				t.Fatalf("packet of %d bytes, length field %d, want %d", len(b), b[3], PacketLen+a.sectionLen())
			}
			if why := r.verify(a, p, b, now, time.Minute); why != "" {
				t.Fatalf("an authentic packet refused: %s", why)
			}
			check := func(what string, a Auth, seq uint32, edit func([]byte), want string) {
				t.Helper()
				p, b := signed(a, seq)
				if edit != nil {
					edit(b)
				}
				r := r // the state after the first packet
				if why := r.verify(Auth{Type: typ, KeyID: 7, Key: "s3cret"}, p, b, now, time.Minute); !strings.Contains(why, want) || want == "" && why != "" {
					t.Errorf("%s: %q, want %q", what, why, want)
				}
			}
			check("another key", Auth{Type: typ, KeyID: 7, Key: "other"}, 101, nil, "bfd_password")
			check("another key ID", Auth{Type: typ, KeyID: 8, Key: "s3cret"}, 101, nil, "key ID 8, not bfd_key_id 7")
			other := AuthKeyedSHA1
			if typ == AuthKeyedSHA1 {
				other = AuthKeyedMD5
			}
			check("another type", Auth{Type: other, KeyID: 7, Key: "s3cret"}, 101, nil, "not bfd_auth "+name)
			check("a flipped bit", a, 101, func(b []byte) { b[13] ^= 1 }, map[bool]string{true: "", false: "digest"}[typ == AuthSimple])
			if typ == AuthSimple {
				return // no sequence numbers
			}
			meticulous := typ == AuthMeticulousKeyedMD5 || typ == AuthMeticulousSHA1
			check("the next", a, 101, nil, "")
			check("a repeat", a, 100, nil, map[bool]string{true: "window", false: ""}[meticulous])
			check("an older one", a, 99, nil, "window")
			check("9 ahead (3 x the detect multiplier)", a, 109, nil, "")
			check("10 ahead", a, 110, nil, "window")
			// Once the session heard nothing for the time given, any
			// sequence number is taken again.
			var late rcvAuth
			late.verify(a, p, b, now, time.Minute)
			p2, b2 := signed(a, 5000)
			if why := late.verify(a, p2, b2, now.Add(time.Minute), time.Minute); why != "" {
				t.Errorf("a new sequence after the session was silent: %s", why)
			}
		})
	}
	var r rcvAuth
	p, b := signed(Auth{Type: AuthKeyedSHA1, KeyID: 1, Key: "k"}, 1)
	if why := r.verify(Auth{}, p, b, now, time.Minute); !strings.Contains(why, "bfd_auth is none") {
		t.Errorf("an authenticated packet to a session without: %q", why)
	}
	plain := Packet{State: Down, DetectMult: 3, MyDisc: 9}
	if why := r.verify(Auth{Type: AuthKeyedSHA1, KeyID: 1, Key: "k"}, plain, plain.Append(nil), now, time.Minute); !strings.Contains(why, "no authentication") {
		t.Errorf("a packet without authentication to a session with: %q", why)
	}
}

// TestTwoManagersAuthenticated: two Managers with the same meticulous
// keyed SHA1 settings bring their session up; with different passwords
// neither does, and the status says why.
func TestTwoManagersAuthenticated(t *testing.T) {
	ma, mb, a1, a2 := twoManagers(t)
	auth := Auth{Type: AuthMeticulousSHA1, KeyID: 3, Key: "dplb"}
	cfgA := Config{Interval: 30 * time.Millisecond, Multiplier: 3, Auth: auth}
	cfgB := cfgA
	cfgB.Auth.Key = "wrong"
	deadline := time.Now().Add(3 * time.Second)
	for {
		sa, _ := ma.Status(a2, netip.Addr{}, cfgA, time.Minute)
		mb.Status(a1, netip.Addr{}, cfgB, time.Minute)
		if sa.State == Up {
			t.Fatalf("up with different passwords: %+v", sa)
		}
		if strings.Contains(sa.AuthError, "bfd_password") && !sa.Heard {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's session %+v, want an authentication error", sa)
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitState(t, mb, a1, cfgA, Up) // the same password: up (b's Status takes the new config)
	if st := waitState(t, ma, a2, cfgA, Up); st.AuthError != "" {
		t.Errorf("up with an authentication error left: %+v", st)
	}
}

// FuzzVerify: whatever a server sends, Parse and every type's
// authentication check return without panicking, and a packet that
// passes a keyed check is one the key signed.
func FuzzVerify(f *testing.F) {
	for _, typ := range AuthTypes {
		a := Auth{Type: typ, KeyID: 1, Key: "k"}
		if typ == AuthNone {
			f.Add(Packet{State: Down, DetectMult: 3, MyDisc: 9}.Append(nil))
			continue
		}
		_, b := signed(a, 1)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		for _, typ := range AuthTypes {
			var r rcvAuth
			a := Auth{Type: typ, KeyID: 1, Key: "k"}
			if r.verify(a, p, b, time.Now(), time.Minute) == "" && typ != AuthNone && typ != AuthSimple {
				// Passed: signing the same header and sequence with the key gives these bytes.
				n := int(b[3])
				head := append([]byte(nil), b[:PacketLen]...)
				if got := a.sign(head, binary.BigEndian.Uint32(b[PacketLen+4:])); !bytes.Equal(got, b[:n]) {
					t.Fatalf("%s passed a packet the key did not sign: % x", typ, b[:n])
				}
			}
		}
	})
}
