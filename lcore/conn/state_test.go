package conn_test

import (
	"testing"

	"github.com/dplb/dplb/lcore/conn"
)

const (
	syn    = conn.TCPFlagSYN
	fin    = conn.TCPFlagFIN
	rst    = conn.TCPFlagRST
	ack    = conn.TCPFlagACK
	synAck = conn.TCPFlagSYN | conn.TCPFlagACK
	finAck = conn.TCPFlagFIN | conn.TCPFlagACK
	rstAck = conn.TCPFlagRST | conn.TCPFlagACK
)

func TestStateString(t *testing.T) {
	want := map[conn.State]string{
		conn.StateNone: "NONE", conn.StateEstablished: "ESTABLISHED", conn.StateSynSent: "SYN_SENT",
		conn.StateSynRecv: "SYN_RECV", conn.StateFinWait: "FIN_WAIT", conn.StateTimeWait: "TIME_WAIT",
		conn.StateClose: "CLOSE", conn.StateCloseWait: "CLOSE_WAIT", conn.StateLastAck: "LAST_ACK",
		conn.StateListen: "LISTEN", conn.StateSynAck: "SYNACK", conn.StateUDP: "UDP",
		conn.NumStates: "ERR!", 255: "ERR!",
	}
	for s, name := range want {
		if got := s.String(); got != name {
			t.Errorf("State(%d).String() = %q, want %q", s, got, name)
		}
	}
	if conn.Original.String() != "original" || conn.Reply.String() != "reply" || conn.Dir(9).String() != "invalid" {
		t.Error("Dir.String names wrong")
	}
}

func TestActive(t *testing.T) {
	for s := conn.State(0); s <= conn.NumStates; s++ {
		if got, want := conn.Active(s), s == conn.StateEstablished; got != want {
			t.Errorf("Active(%v) = %v, want %v", s, got, want)
		}
	}
}

type step struct {
	dir   conn.Dir
	flags uint8
	want  conn.State
}

// Sequences and their expected states, read off the kernel's tables.
var tcpSequences = []struct {
	name   string
	oneWay bool
	start  conn.State
	steps  []step
}{
	{"nat handshake", false, conn.StateNone, []step{
		{conn.Original, syn, conn.StateSynRecv},
		{conn.Reply, synAck, conn.StateSynRecv}, // output syn in sSR stays sSR
		{conn.Original, ack, conn.StateEstablished},
		{conn.Reply, ack, conn.StateEstablished},
	}},
	{"nat client closes first", false, conn.StateEstablished, []step{
		{conn.Original, finAck, conn.StateCloseWait},
		{conn.Reply, ack, conn.StateCloseWait},
		{conn.Reply, finAck, conn.StateTimeWait},
		{conn.Original, ack, conn.StateTimeWait},
	}},
	{"nat server closes first", false, conn.StateEstablished, []step{
		{conn.Reply, finAck, conn.StateFinWait},
		{conn.Original, ack, conn.StateFinWait},
		{conn.Original, finAck, conn.StateTimeWait},
		{conn.Reply, ack, conn.StateTimeWait},
	}},
	{"nat client reset", false, conn.StateEstablished, []step{
		{conn.Original, rstAck, conn.StateClose},
		{conn.Original, ack, conn.StateClose},
	}},
	{"nat server reset", false, conn.StateEstablished, []step{
		{conn.Reply, rst, conn.StateClose},
	}},
	{"nat client rst in SYN_RECV ignored, server rst closes", false, conn.StateNone, []step{
		{conn.Original, syn, conn.StateSynRecv},
		{conn.Original, rst, conn.StateSynRecv},
		{conn.Reply, rst, conn.StateClose},
	}},
	{"nat server refuses", false, conn.StateNone, []step{
		{conn.Original, syn, conn.StateSynRecv},
		{conn.Reply, rstAck, conn.StateClose},
		{conn.Original, syn, conn.StateSynRecv}, // client retries: reused entry
	}},
	{"server opens (active FTP data)", false, conn.StateNone, []step{
		{conn.Reply, syn, conn.StateSynSent},
		{conn.Original, synAck, conn.StateEstablished}, // input syn in sSS -> sES
	}},
	{"mid-stream ack with no entry state", false, conn.StateNone, []step{
		{conn.Original, ack, conn.StateEstablished},
	}},
	{"reply ack in NONE", false, conn.StateNone, []step{
		{conn.Reply, ack, conn.StateEstablished},
	}},
	{"port reuse from TIME_WAIT", false, conn.StateTimeWait, []step{
		{conn.Original, syn, conn.StateSynRecv},
	}},
	{"LAST_ACK input ack closes, output ack stays", false, conn.StateLastAck, []step{
		{conn.Reply, ack, conn.StateLastAck},
		{conn.Original, ack, conn.StateClose},
	}},
	{"event priority", false, conn.StateEstablished, []step{
		{conn.Original, syn | fin, conn.StateEstablished}, // SYN beats FIN: input syn in sES stays
		{conn.Original, rst | syn, conn.StateClose},       // RST beats SYN
		{conn.Original, syn | ack, conn.StateSynRecv},     // SYN beats ACK
		{conn.Original, fin | ack, conn.StateTimeWait},    // FIN beats ACK: input fin in sSR -> sTW
	}},
	{"no flags closes, as the kernel does", false, conn.StateEstablished, []step{
		{conn.Original, 0, conn.StateClose},
		{conn.Reply, 0x08 /* PSH only */, conn.StateClose},
	}},
	{"one-way handshake and close", true, conn.StateNone, []step{
		{conn.Original, syn, conn.StateSynRecv},
		{conn.Original, ack, conn.StateEstablished},
		{conn.Original, finAck, conn.StateFinWait}, // input-only fin in sES -> sFW, not sCW
		{conn.Original, ack, conn.StateFinWait},
		{conn.Original, finAck, conn.StateFinWait},
		{conn.Original, rst, conn.StateClose},
	}},
	{"one-way rst in SYN_RECV ignored", true, conn.StateSynRecv, []step{
		{conn.Original, rst, conn.StateSynRecv},
		{conn.Original, ack, conn.StateEstablished},
	}},
	{"one-way SYNACK state resets on rst", true, conn.StateSynAck, []step{
		{conn.Original, rst, conn.StateClose}, // input-only rst in sSA -> sCL, input rst -> sSR
	}},
	{"one-way reply uses output rows", true, conn.StateSynRecv, []step{
		{conn.Reply, rst, conn.StateClose},
	}},
	{"one-way fin in SYN_SENT keeps SYN_SENT", true, conn.StateSynSent, []step{
		{conn.Original, fin, conn.StateSynSent},
	}},
}

func TestNextTCPState(t *testing.T) {
	for _, seq := range tcpSequences {
		cur := seq.start
		for i, s := range seq.steps {
			got := conn.NextTCPState(cur, s.dir, s.flags, seq.oneWay)
			if got != s.want {
				t.Errorf("%s step %d: NextTCPState(%v, %v, %#x, %v) = %v, want %v",
					seq.name, i, cur, s.dir, s.flags, seq.oneWay, got, s.want)
			}
			cur = got
		}
	}
}

func TestNextTCPStateSecure(t *testing.T) {
	tests := []struct {
		name   string
		oneWay bool
		start  conn.State
		steps  []step
	}{
		{"nat: client ACK alone does not establish", false, conn.StateNone, []step{
			{conn.Original, syn, conn.StateSynRecv},
			{conn.Original, ack, conn.StateSynRecv}, // dos input ack in sSR stays sSR
			{conn.Reply, synAck, conn.StateSynAck},  // dos output syn in sSR -> sSA
			{conn.Original, ack, conn.StateSynAck},  // dos input ack in sSA stays
			{conn.Reply, ack, conn.StateEstablished},
		}},
		{"one-way: SYN goes to SYNACK", true, conn.StateNone, []step{
			{conn.Original, syn, conn.StateSynAck},
			{conn.Original, ack, conn.StateEstablished},
		}},
	}
	for _, seq := range tests {
		cur := seq.start
		for i, s := range seq.steps {
			got := conn.NextTCPStateSecure(cur, s.dir, s.flags, seq.oneWay)
			if got != s.want {
				t.Errorf("%s step %d: NextTCPStateSecure(%v, %v, %#x) = %v, want %v", seq.name, i, cur, s.dir, s.flags, got, s.want)
			}
			cur = got
		}
	}
}

func TestNextTCPStateInvalidInput(t *testing.T) {
	tests := []struct {
		cur  conn.State
		dir  conn.Dir
		want conn.State
	}{
		{conn.StateUDP, conn.Original, conn.StateUDP},
		{conn.State(200), conn.Reply, conn.State(200)},
		{conn.StateEstablished, conn.Dir(2), conn.StateEstablished},
	}
	for _, tt := range tests {
		if got := conn.NextTCPState(tt.cur, tt.dir, rst, false); got != tt.want {
			t.Errorf("NextTCPState(%v, %v, RST) = %v, want %v", tt.cur, tt.dir, got, tt.want)
		}
	}
}

func TestDefaultTimeouts(t *testing.T) {
	const s = int64(1e9)
	want := map[conn.State]int64{
		conn.StateNone: 2 * s, conn.StateEstablished: 900 * s, conn.StateSynSent: 60 * s,
		conn.StateSynRecv: 60 * s, conn.StateFinWait: 60 * s, conn.StateTimeWait: 60 * s,
		conn.StateClose: 10 * s, conn.StateCloseWait: 60 * s, conn.StateLastAck: 30 * s,
		conn.StateListen: 120 * s, conn.StateSynAck: 60 * s, conn.StateUDP: 300 * s,
		conn.NumStates: 2 * s, 255: 2 * s, // out of range: NONE's timeout
	}
	to := conn.DefaultTimeouts()
	for st, ns := range want {
		if got := to.For(st); got != ns {
			t.Errorf("For(%v) = %d, want %d", st, got, ns)
		}
	}
	to.ByState[conn.StateEstablished] = 7
	if got := to.For(conn.StateEstablished); got != 7 {
		t.Errorf("For after override = %d, want 7", got)
	}
}
