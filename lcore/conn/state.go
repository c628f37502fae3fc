package conn

// State is a connection's protocol state. The TCP values keep IPVS's
// numbering (IP_VS_TCP_S_*), so the transition tables below read the same
// as the kernel's.
type State uint8

// TCP states as in IPVS, then the single UDP state.
const (
	StateNone State = iota
	StateEstablished
	StateSynSent
	StateSynRecv
	StateFinWait
	StateTimeWait
	StateClose
	StateCloseWait
	StateLastAck
	StateListen
	StateSynAck
	StateUDP

	numTCPStates = StateSynAck + 1
	// NumStates is one past the last State, for arrays indexed by State.
	NumStates = StateUDP + 1
)

var stateNames = [NumStates]string{
	StateNone:        "NONE",
	StateEstablished: "ESTABLISHED",
	StateSynSent:     "SYN_SENT",
	StateSynRecv:     "SYN_RECV",
	StateFinWait:     "FIN_WAIT",
	StateTimeWait:    "TIME_WAIT",
	StateClose:       "CLOSE",
	StateCloseWait:   "CLOSE_WAIT",
	StateLastAck:     "LAST_ACK",
	StateListen:      "LISTEN",
	StateSynAck:      "SYNACK",
	StateUDP:         "UDP",
}

// String returns the name ipvsadm -L -c prints for the state.
func (s State) String() string {
	if s < NumStates {
		return stateNames[s]
	}
	return "ERR!" // what the kernel's tcp_state_name prints for a bad state
}

// Active reports whether a connection in state s counts toward a real
// server's ActiveConn (ipvsadm -L); every other state counts as InActConn.
// This is the classic IPVS rule. Mainline Linux has since also counted
// SYN_SENT, SYN_RECV and SYNACK as active (tcp_state_active_table).
func Active(s State) bool { return s == StateEstablished }

// TCP header flag bits, as in the TCP header's flags byte.
const (
	TCPFlagFIN uint8 = 0x01
	TCPFlagSYN uint8 = 0x02
	TCPFlagRST uint8 = 0x04
	TCPFlagACK uint8 = 0x10
)

// Abbreviations as in the kernel, so the tables can be diffed against it.
const (
	sNO = StateNone
	sES = StateEstablished
	sSS = StateSynSent
	sSR = StateSynRecv
	sFW = StateFinWait
	sTW = StateTimeWait
	sCL = StateClose
	sCW = StateCloseWait
	sLA = StateLastAck
	sLI = StateListen
	sSA = StateSynAck
)

// Rows of a transition table: the kernel's TCP_DIR_INPUT, TCP_DIR_OUTPUT
// and TCP_DIR_INPUT_ONLY offsets divided by four.
const (
	rowInput     = 0 // client -> server, both directions seen (NAT)
	rowOutput    = 1 // server -> client
	rowInputOnly = 2 // client -> server, replies bypass us (DR, TUN)
)

// Events: the kernel's tcp_state_idx values.
const (
	evSYN = 0
	evFIN = 1
	evACK = 2
	evRST = 3
)

type tcpStateTable [3][4][numTCPStates]State

// tcpStates is tcp_states[] from Linux net/netfilter/ipvs/ip_vs_proto_tcp.c
// as in current mainline (some older kernels and their ports, e.g. OFP, move
// an ACK in sNO to sCL instead of sES), laid out [direction][event][current
// state]; each row matches the kernel's row of the same comment. Read-only.
var tcpStates = tcpStateTable{
	rowInput: {
		/*        sNO, sES, sSS, sSR, sFW, sTW, sCL, sCW, sLA, sLI, sSA */
		/*syn*/ {sSR, sES, sES, sSR, sSR, sSR, sSR, sSR, sSR, sSR, sSR},
		/*fin*/ {sCL, sCW, sSS, sTW, sTW, sTW, sCL, sCW, sLA, sLI, sTW},
		/*ack*/ {sES, sES, sSS, sES, sFW, sTW, sCL, sCW, sCL, sLI, sES},
		/*rst*/ {sCL, sCL, sCL, sSR, sCL, sCL, sCL, sCL, sLA, sLI, sSR},
	},
	rowOutput: {
		/*        sNO, sES, sSS, sSR, sFW, sTW, sCL, sCW, sLA, sLI, sSA */
		/*syn*/ {sSS, sES, sSS, sSR, sSS, sSS, sSS, sSS, sSS, sLI, sSR},
		/*fin*/ {sTW, sFW, sSS, sTW, sFW, sTW, sCL, sTW, sLA, sLI, sTW},
		/*ack*/ {sES, sES, sSS, sES, sFW, sTW, sCL, sCW, sLA, sES, sES},
		/*rst*/ {sCL, sCL, sSS, sCL, sCL, sTW, sCL, sCL, sCL, sCL, sCL},
	},
	rowInputOnly: {
		/*        sNO, sES, sSS, sSR, sFW, sTW, sCL, sCW, sLA, sLI, sSA */
		/*syn*/ {sSR, sES, sES, sSR, sSR, sSR, sSR, sSR, sSR, sSR, sSR},
		/*fin*/ {sCL, sFW, sSS, sTW, sFW, sTW, sCL, sCW, sLA, sLI, sTW},
		/*ack*/ {sES, sES, sSS, sES, sFW, sTW, sCL, sCW, sCL, sLI, sES},
		/*rst*/ {sCL, sCL, sCL, sSR, sCL, sCL, sCL, sCL, sLA, sLI, sCL},
	},
}

// tcpStatesDoS is tcp_states_dos[] from the same file: the table IPVS
// switches to under the secure_tcp defense, where a connection is not
// ESTABLISHED until the server has answered (or, one-way, until the
// client's ACK follows its SYN), so SYN floods age out on short timeouts.
// Read-only.
var tcpStatesDoS = tcpStateTable{
	rowInput: {
		/*        sNO, sES, sSS, sSR, sFW, sTW, sCL, sCW, sLA, sLI, sSA */
		/*syn*/ {sSR, sES, sES, sSR, sSR, sSR, sSR, sSR, sSR, sSR, sSA},
		/*fin*/ {sCL, sCW, sSS, sTW, sTW, sTW, sCL, sCW, sLA, sLI, sSA},
		/*ack*/ {sES, sES, sSS, sSR, sFW, sTW, sCL, sCW, sCL, sLI, sSA},
		/*rst*/ {sCL, sCL, sCL, sSR, sCL, sCL, sCL, sCL, sLA, sLI, sCL},
	},
	rowOutput: {
		/*        sNO, sES, sSS, sSR, sFW, sTW, sCL, sCW, sLA, sLI, sSA */
		/*syn*/ {sSS, sES, sSS, sSA, sSS, sSS, sSS, sSS, sSS, sLI, sSA},
		/*fin*/ {sTW, sFW, sSS, sTW, sFW, sTW, sCL, sTW, sLA, sLI, sTW},
		/*ack*/ {sES, sES, sSS, sES, sFW, sTW, sCL, sCW, sLA, sES, sES},
		/*rst*/ {sCL, sCL, sSS, sCL, sCL, sTW, sCL, sCL, sCL, sCL, sCL},
	},
	rowInputOnly: {
		/*        sNO, sES, sSS, sSR, sFW, sTW, sCL, sCW, sLA, sLI, sSA */
		/*syn*/ {sSA, sES, sES, sSR, sSA, sSA, sSA, sSA, sSA, sSA, sSA},
		/*fin*/ {sCL, sFW, sSS, sTW, sFW, sTW, sCL, sCW, sLA, sLI, sTW},
		/*ack*/ {sES, sES, sSS, sES, sFW, sTW, sCL, sCW, sCL, sLI, sES},
		/*rst*/ {sCL, sCL, sCL, sSR, sCL, sCL, sCL, sCL, sLA, sLI, sCL},
	},
}

// NextTCPState returns the state after a TCP packet with header flags
// flags travels in direction dir, as IPVS's set_tcp_state does with its
// default table. oneWay selects the INPUT-ONLY rows for Original packets
// (DR/TUN, where IPVS sets IP_VS_CONN_F_NOOUTPUT); a Reply packet always
// uses the OUTPUT rows, as in the kernel.
//
// As in the kernel, the event is the highest of RST > SYN > FIN > ACK, and
// a packet with none of them moves the connection to CLOSE. A state that is
// not a TCP state (StateUDP, or out of range) or an invalid dir is returned
// unchanged.
func NextTCPState(cur State, dir Dir, flags uint8, oneWay bool) State {
	return nextTCPState(&tcpStates, cur, dir, flags, oneWay)
}

// NextTCPStateSecure is NextTCPState with IPVS's tcp_states_dos table, the
// one the kernel uses when the secure_tcp defense is on.
func NextTCPStateSecure(cur State, dir Dir, flags uint8, oneWay bool) State {
	return nextTCPState(&tcpStatesDoS, cur, dir, flags, oneWay)
}

func nextTCPState(tbl *tcpStateTable, cur State, dir Dir, flags uint8, oneWay bool) State {
	if cur >= numTCPStates {
		return cur
	}
	var row int
	switch {
	case dir == Reply:
		row = rowOutput
	case dir != Original:
		return cur
	case oneWay:
		row = rowInputOnly
	default:
		row = rowInput
	}
	var ev int
	switch {
	case flags&TCPFlagRST != 0:
		ev = evRST
	case flags&TCPFlagSYN != 0:
		ev = evSYN
	case flags&TCPFlagFIN != 0:
		ev = evFIN
	case flags&TCPFlagACK != 0:
		ev = evACK
	default:
		return StateClose // tcp_state_idx < 0: the kernel's new_state default
	}
	return tbl[row][ev][cur]
}
