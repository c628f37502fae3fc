package lcore

import (
	"fmt"

	"github.com/dplb/dplb/lcore/hdr"
)

// The control plane and a worker talk through two rings: commands down,
// events up.

// CommandKind says what the control plane asks of a worker.
type CommandKind uint8

const (
	// CmdSnapshot switches to Command.Snap and acknowledges its generation.
	CmdSnapshot CommandKind = iota + 1
	// CmdARPRequest sends an ARP request for Command.IP out of Command.Port.
	CmdARPRequest
	// CmdDump lists the connections matching Command.Dump, a slice of the
	// table per commands job, and marks it done.
	CmdDump
	// CmdProbe sends a probe, a TCP SYN from the output port's address to
	// Command.IP:DstPort from SrcPort (a health check through lbd).
	CmdProbe
	// CmdSyncInstall installs the records of Command.Sync, received from a
	// peer director, in the worker's table (or the shared template table)
	// and marks the batch done.
	CmdSyncInstall
	// CmdAnnounce sends a gratuitous ARP for Command.IP out of
	// Command.Port, or an unsolicited NA for Command.IP6 when it is set.
	CmdAnnounce
	// CmdTrace answers Command.Trace: what the worker would do with one
	// flow's next packet (trace.go); it changes nothing.
	CmdTrace
	// CmdSolicit sends a neighbour solicitation for Command.IP6 out of
	// Command.Port (IPv6's CmdARPRequest).
	CmdSolicit
	// CmdProbeSegment sends an HTTP probe's segment: Flags, Seq, Ack and
	// Payload from the output port's address and SrcPort to
	// Command.IP (or IP6):DstPort.
	CmdProbeSegment
	// CmdProbeDatagram sends a UDP probe: Payload from the output port's
	// address and SrcPort to Command.IP (or IP6):DstPort.
	CmdProbeDatagram
	// CmdProbeEcho sends an ICMP probe: an echo request from the output
	// port's address to Command.IP (or IP6), identifier SrcPort,
	// sequence number the low 16 bits of Seq.
	CmdProbeEcho
	// CmdAnnounce6 sends the unsolicited NAs a takeover sends out of
	// Command.Port (announce6): its IPv6 address and, on a master, its
	// IPv6 floating addresses and VIPs. The control plane asks for it when
	// the port's link comes back.
	CmdAnnounce6
)

var commandNames = [...]string{CmdSnapshot: "snapshot", CmdARPRequest: "arp_request", CmdDump: "dump", CmdProbe: "probe",
	CmdSyncInstall: "sync_install", CmdAnnounce: "announce", CmdTrace: "trace", CmdSolicit: "solicit", CmdProbeSegment: "probe_segment", CmdProbeDatagram: "probe_datagram",
	CmdProbeEcho: "probe_echo", CmdAnnounce6: "announce6"}

func (k CommandKind) String() string { return name(commandNames[:], uint8(k), "command") }

// Command is a message from the control plane to a worker.
type Command struct {
	Kind CommandKind
	Snap *Snapshot
	Port int
	IP   uint32
	IP6  hdr.Addr6 // CmdSolicit's target; CmdProbe's server when IPv6 (else IP); CmdAnnounce's when set
	Dump *DumpRequest
	Sync *SyncBatch
	// CmdProbe's ports and initial sequence number (drawn at random by
	// the control plane, which checks the answer's ack against it), and
	// CmdProbeSegment's ports, sequence numbers, flags and data.
	DstPort, SrcPort uint16
	Seq, Ack         uint32
	Flags            uint8
	Payload          []byte
	// Trace is CmdTrace's request, answered in place.
	Trace *TraceRequest
}

// EventKind says what a worker tells the control plane.
type EventKind uint8

const (
	// EvNeighbour: an ARP packet showed that IP is at MAC on Port.
	EvNeighbour EventKind = iota + 1
	// EvNeighbourMiss: a packet was dropped because IP has no MAC yet.
	EvNeighbourMiss
	// EvProbe: the result of a probe (Event.Result).
	EvProbe
	// EvAddressConflict: the host at MAC on Port claims IP, one of our
	// addresses or VIPs, in ARP (not learnt; counted arp_conflict).
	EvAddressConflict
	// EvNeighbour6: an NS or NA showed that IP6 is at MAC on Port.
	EvNeighbour6
	// EvNeighbourMiss6: a packet was dropped because IP6 has no MAC yet.
	EvNeighbourMiss6
)

var eventNames = [...]string{EvNeighbour: "neighbour", EvNeighbourMiss: "neighbour_miss", EvProbe: "probe", EvAddressConflict: "address_conflict",
	EvNeighbour6: "neighbour6", EvNeighbourMiss6: "neighbour_miss6"}

func (k EventKind) String() string { return name(eventNames[:], uint8(k), "event") }

// ProbeResult is what a probe found.
type ProbeResult uint8

const (
	ProbeOpen    ProbeResult = iota + 1 // the server answered SYN-ACK: the port listens
	ProbeRefused                        // it answered RST: nothing listens
	ProbeNotSent                        // the probe could not be sent (no route, no MAC, no mbuf)
	// ProbeData: an HTTP probe's server sent data or FIN after the
	// handshake (Event.Seq, Flags, Data say what), and lbd answered RST;
	// or a UDP probe's server replied (Event.Data), or an ICMP probe's
	// echo reply came.
	ProbeData
)

var probeResultNames = [...]string{ProbeOpen: "open", ProbeRefused: "refused", ProbeNotSent: "not_sent", ProbeData: "data"}

// ProbeDataLen is how much of a probe's answer an event carries: an HTTP
// status line's start ("HTTP/1.1 200"), the start of a UDP reply.
const ProbeDataLen = 64

func (r ProbeResult) String() string { return name(probeResultNames[:], uint8(r), "probe_result") }

// name looks a value up in a table of names, or says it is unknown.
func name(names []string, v uint8, kind string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}

// Event is a message from a worker to the control plane.
type Event struct {
	Kind EventKind
	Port int
	IP   uint32
	IP6  hdr.Addr6 // EvNeighbour6, EvNeighbourMiss6; EvProbe's server when IPv6 (else IP)
	MAC  hdr.MAC
	// EvProbe: the probe's protocol (0 or TCP, UDP, ICMP for ICMPv6 too),
	// the probed server's port, the probe's source port (ICMP: the echo
	// identifier), the result and the answer's acknowledgement number (the
	// probe's Seq + 1 when the answer is genuine; ICMP: the echo sequence
	// number); its sequence number and flags, and for ProbeData the first
	// DataLen bytes of its data.
	Proto            uint8
	DstPort, SrcPort uint16
	Result           ProbeResult
	Ack, Seq         uint32
	Flags            uint8
	DataLen          uint8
	Data             [ProbeDataLen]byte
}
