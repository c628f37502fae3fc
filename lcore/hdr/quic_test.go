package hdr

import (
	"bytes"
	"testing"
)

// TestQUICCIDDPVSExample: DPVS's own example of its format: 10 bytes,
// two address bytes of 192.168.111.222 and port 8029 give XX36 FDE1
// F5DX XXXX XXXX.
func TestQUICCIDDPVSExample(t *testing.T) {
	nonce := bytes.Repeat([]byte{0xab}, 20)
	cid, ok := AppendQUICCID(nil, 10, []byte{192, 168, 111, 222}, 2, 8029, nonce)
	if !ok {
		t.Fatal("refused")
	}
	if want := []byte{0xab, 0x36, 0xfd, 0xe1, 0xf5, 0xdb, 0xab, 0xab, 0xab, 0xab}; !bytes.Equal(cid, want) {
		t.Fatalf("cid % x, want % x", cid, want)
	}
	// As a short header's destination ID.
	addr, n, port, ok := QUICServer(append([]byte{0x40}, cid...))
	if !ok || n != 2 || addr[6] != 111 || addr[7] != 222 || port != 8029 {
		t.Fatalf("QUICServer = % x, %d, %d, %v", addr, n, port, ok)
	}
}

func TestQUICServer(t *testing.T) {
	nonce := bytes.Repeat([]byte{0x5c}, 20)
	v4 := []byte{198, 51, 100, 11}
	v6 := []byte{0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11}
	mk := func(cidLen int, addr []byte, n int, port uint16) []byte {
		cid, ok := AppendQUICCID(nil, cidLen, addr, n, port, nonce)
		if !ok {
			t.Fatalf("AppendQUICCID(%d, %d, %d) refused", cidLen, n, port)
		}
		return cid
	}
	long := func(version uint32, cid []byte) []byte {
		b := []byte{0xc0, byte(version >> 24), byte(version >> 16), byte(version >> 8), byte(version), byte(len(cid))}
		return append(append(b, cid...), 0, 0x44) // an empty source ID, a token length...
	}
	short := func(cid []byte) []byte { return append(append([]byte{0x41}, cid...), 1, 2, 3, 4) }
	tests := []struct {
		name    string
		payload []byte
		addr    []byte // nil: no server named
		port    uint16
	}{
		{"short, 4 bytes of IPv4", short(mk(9, v4, 4, 0)), v4, 0},
		{"short, 1 byte and the port", short(mk(8, v4, 1, 8443)), v4[3:], 8443},
		{"long v1, 8 bytes of IPv6", long(1, mk(20, v6, 8, 443)), v6[8:], 443},
		{"long version 2: not DPVS's", long(0x6b3343cf, mk(9, v4, 4, 0)), nil, 0},
		{"long, a 6-byte ID", long(1, []byte{1, 2, 3, 4, 5, 6}), nil, 0},
		{"long, ID length beyond the packet", []byte{0xc0, 0, 0, 0, 1, 20, 1, 2, 3}, nil, 0},
		{"no fixed bit", append([]byte{0x01}, mk(9, v4, 4, 0)...), nil, 0},
		{"short, cut before the address ends", short(mk(9, v4, 4, 0))[:5], nil, 0},
		{"empty", nil, nil, 0},
	}
	for _, tt := range tests {
		addr, n, port, ok := QUICServer(tt.payload)
		switch {
		case tt.addr == nil && ok:
			t.Errorf("%s: names % x:%d, want nothing", tt.name, addr[8-n:], port)
		case tt.addr != nil && (!ok || !bytes.Equal(addr[8-n:], tt.addr) || port != tt.port):
			t.Errorf("%s: QUICServer = % x (%d), %d, %v; want % x, %d", tt.name, addr, n, port, ok, tt.addr, tt.port)
		}
	}
	if _, ok := AppendQUICCID(nil, 8, v4, 4, 443, nonce); ok {
		t.Errorf("an 8-byte ID holding 4 address bytes and a port: want refused (DPVS wants 5 bytes more than them)")
	}
}

// FuzzQUICServer: any datagram is read without a panic, and a server it
// names is at most 8 bytes; an ID made by AppendQUICCID reads back.
func FuzzQUICServer(f *testing.F) {
	cid, _ := AppendQUICCID([]byte{0x40}, 10, []byte{192, 168, 111, 222}, 2, 8029, bytes.Repeat([]byte{1}, 20))
	f.Add(cid)
	f.Add([]byte{0xc0, 0, 0, 0, 1, 8, 0, 0x36, 0xfd, 0xe1, 0xf5, 0xd0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		addr, n, port, ok := QUICServer(b)
		if ok && (n < 1 || n > 8) {
			t.Fatalf("names %d address bytes", n)
		}
		if !ok || len(b) < 1 || b[0]&0x80 != 0 {
			return
		}
		again, made := AppendQUICCID([]byte{b[0]}, max(QUICMinCID, n+7), addr[8-n:], n, port, bytes.Repeat([]byte{7}, 20))
		if !made {
			t.Fatalf("AppendQUICCID refuses % x (%d), %d", addr, n, port)
		}
		if a2, n2, p2, ok2 := QUICServer(again); !ok2 || a2 != addr || n2 != n || p2 != port {
			t.Fatalf("% x: %v %d %d, then % x: %v %d %d", b, addr, n, port, again, a2, n2, p2)
		}
	})
}
