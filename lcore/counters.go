package lcore

import "sync/atomic"

// Stat names an lcore counter. Each lcore counts in private memory and
// publishes copies for readers (Publish job), so the packet path never
// executes an atomic read-modify-write.
type Stat int

// Counters of an lcore; the Drop... ones are the named drop reasons (every
// packet the dataplane discards is counted under exactly one of them).
const (
	RxPackets Stat = iota
	RxBytes
	TxPackets
	TxBytes
	NewConns          // connections created
	Conns             // connections in the table (a gauge)
	ARPReplies        // ARP requests answered
	ARPReceived       // ARP replies received (and learnt from)
	ARPRequests       // ARP requests sent to resolve neighbours
	EventsLost        // events to the control plane lost to a full ring
	MbufAllocFailed   // packets the worker could not make (ARP requests, probes): the pool was empty
	Encapsulated      // packets sent to real servers in IPIP (VS/TUN)
	ICMPEchoReplies   // echo requests to a VIP or our address answered
	ICMPErrors        // ICMP errors about a connection delivered
	ICMPFragNeeded    // "fragmentation needed" sent for packets too big for a tunnel
	HandedOff         // packets passed to the lcore that owns their connection
	HandedIn          // packets received from other lcores
	TxHandedOff       // packets given to another lcore to send (a port with fewer queues than lcores)
	ProbesSent        // health probes (SYNs) sent through lbd
	ProbeAnswers      // servers' answers to them received
	Templates         // persistence templates created
	TemplatesLost     // templates not stored (table full): the connection went on without
	Iterations        // poll loop iterations
	BusyNanos         // time spent in polls that carried packets (VPP's "busy" time)
	LoopNanos         // time the poll loop has run (a gauge, set when published)
	IdleSleeps        // sleeps taken while idle (idle_sleep)
	Evictions         // embryonic or idle entries evicted under table pressure (drop_entry)
	ShortTimeouts     // embryonic entries given a short timeout under table pressure (secure)
	DefenseSecure     // 1 while the table is above the secure threshold (a gauge)
	DefenseDrop       // 1 while the table is above the drop_entry threshold (a gauge)
	ICMPTimeExceeded  // ICMP time exceeded sent for packets whose TTL ran out here
	CsumOffloaded     // NAT packets whose checksums were left to the output port (vouched for on arrival)
	SyncRecords       // connection and template records put on the sync ring for the peers
	SyncRingFull      // records lost to a full sync ring (sent again at the next threshold or refresh)
	GratuitousARPs    // gratuitous ARPs sent (a takeover's announcements)
	Fragments         // IPv4 fragments forwarded (counted by the worker that owns their connection)
	FragmentsHeld     // later fragments that waited for their datagram's first one
	FTPRewritten      // FTP 227 replies whose address was rewritten to the VIP
	FTPExpected       // FTP data connections announced (PORT, EPRT, 227, 229) and expected
	FTPDataConns      // FTP data connections made from an expectation
	ProxyHeaders      // PROXY protocol v2 headers put in FullNAT connections' first segments
	TOAOptions        // TCP option addresses (DPVS's TOA) put in FullNAT handshakes' last segments
	TOANoRoom         // such segments sent without one: no room in the TCP header or the MTU
	UOAOptions        // UDP options of address (DPVS's UOA) put in FullNAT connections' first datagrams
	UOAAlone          // such options sent in an empty datagram of their own, ahead of a datagram with no room for one (the IPv4 options or the MTU)
	SynCookiesSent    // SYN proxy: SYNs answered with a cookie SYN-ACK
	SynCookiesValid   // SYN proxy: ACKs whose cookie proved good (connections opened)
	SynProxyHeld      // SYN proxy: client segments with data held until the server's SYN-ACK
	SynProxyDeferred  // SYN proxy: client data not held (one is held already, no slot or no spare mbuf): the segment left as the SYN, the client sends the data again
	NDAdverts         // IPv6 neighbour advertisements sent (answers and unsolicited)
	NDReceived        // IPv6 neighbour advertisements received
	ICMPv6EchoReplies // ICMPv6 echo replies sent (for a port's IPv6 address)
	NDSolicits        // IPv6 neighbour solicitations sent (resolving real servers and gateways)
	ICMPv6TooBig      // ICMPv6 Packet Too Big sent for packets too big for an IPv6 tunnel
	ICMPv6HopLimit    // ICMPv6 Time Exceeded sent for packets whose hop limit ran out here
	Steered           // server packets a steering entry handed to the lcore holding their connection (steerentry.go)
	ToKernel          // packets handed to a port's kernel interface (kernel.go)
	FromKernel        // frames a port's kernel interface sent out of the port
	// Where the poll loop's time goes (loopstats.go): the longest loop
	// iteration so far (a gauge), TSC cycles per stage of the bursts that
	// carried packets, and iterations by duration (LoopIterations0 + i
	// counts those shorter than LoopBucketBound(i), the last the rest).
	LoopMaxNanos
	StageRxCycles      // receiving the bursts (the driver's RX)
	StageParseCycles   // parsing and validating them (desc.go)
	StageLookupCycles  // hashing their keys and prefetching their table cells
	StageProcessCycles // lookup, state, scheduling, rewrite, queueing for TX
	StageTxCycles      // sending (the driver's TX, handoff rings)
	LoopIterations0
	// The other buckets follow; iota + LoopBuckets - 1 repeats below, so
	// every later counter keeps its place after them.
	loopIterationsLast Stat = iota + LoopBuckets - 2

	DropBadEthernet      // shorter than an Ethernet header
	DropMultiSegment     // chained mbufs (RX scatter is off; should not happen)
	DropNotIPv4          // EtherType neither IPv4, IPv6 nor ARP
	DropBadARP           // ARP that is not Ethernet/IPv4 or truncated
	DropARPNotOurs       // ARP for an address that is not ours
	DropBadIPv4          // IPv4 header fails validation (version, lengths)
	DropBadIPChecksum    // IPv4 header checksum wrong
	DropFragment         // a fragment of a datagram neither TCP nor UDP
	DropBadL4            // truncated or malformed TCP header
	DropUnsupportedProto // neither TCP, UDP nor ICMP
	DropBadICMP          // truncated ICMP, or an error quoting no usable packet
	DropICMPType         // an ICMP type the balancer neither answers nor forwards
	DropToLocal          // addressed to one of our own port addresses
	DropNoService        // to a VIP, on a port/protocol with no service
	DropNotSYN           // first packet of an unknown TCP flow is not a SYN
	DropNoDest           // the scheduler found no available real server
	DropTableFull        // the connection table is full
	DropConnExists       // the reply key is taken by another connection
	DropNoConn           // not for a VIP and no connection: we are not a router
	DropNoRoute          // no port reaches the destination
	DropNoNeighbour      // next hop's MAC not resolved (yet)
	DropTxFull           // the TX queue did not take the packet
	DropTooBig           // too big for the tunnel and fragmentation allowed (not done)
	DropNoHeadroom       // no room in the mbuf for an added header
	DropHandoffFull      // the ring to the owning lcore was full
	DropDestDown         // a connection to a failed server, ended (on_failure: expire)
	DropNotOurMAC        // unicast to another station's MAC (seen in promiscuous mode)
	DropARPConflict      // ARP from another host claiming one of our addresses or VIPs
	DropTTLExpired       // TTL ran out here and no time exceeded was sent (rate limit, an ICMP error)
	DropProbeSpoofed     // a probe answer on a port that does not lead to the server
	DropBadFragment      // a malformed fragment: tiny first fragment, misaligned data, TCP at offset 8
	DropFragOversize     // a fragment reaching past 65535 bytes
	DropFragTableFull    // no room in the fragment table for a new datagram
	DropFragHeldFull     // a later fragment with no room to wait for its first one
	DropFragTimeout      // a held fragment whose first fragment did not come in time
	DropFragOrphan       // a later fragment at the owner with no first fragment before it
	DropFTPUnparsed      // an FTP PORT, EPRT, 227 or 229 the helper could not read (or naming another host)
	DropFTPExpectFull    // an FTP command whose data connection could not be expected (table full)
	DropFTPTableFull     // a new FTP control connection beyond what a worker tracks
	DropNoLocalPort      // a new FullNAT connection found no free local port on this lcore
	DropSynCookieInvalid // SYN proxy: an ACK of no connection whose cookie is not good
	DropSynProxyPending  // SYN proxy: a real server's segment before its SYN-ACK
	DropBadIPv6          // a malformed IPv6 header or a truncated extension header
	DropIPv6ExtHeader    // an IPv6 extension-header chain not walked: too long, unknown (ESP, AH), routing with segments left
	DropIPv6Unserved     // IPv6 fragments and upper layers other than TCP, UDP and ICMPv6: not served
	DropBadND            // a neighbour solicitation or advertisement that breaks RFC 4861's checks
	DropNDNotOurs        // a neighbour solicitation for an address that is not ours
	DropFragShifted      // a fragment of a FullNAT datagram whose first fragment would take the PROXY v2 header: the later ones' offsets cannot follow
	DropFragNoChecksum   // a fragment of a UDP datagram without a checksum from a NAT64 server: IPv6 requires one, over the whole datagram
	DropClientBlocked    // a new connection from a client the service's blocklist names (clientacl.go)
	DropClientNotAllowed // a new connection from a client the service's allowlist does not name
	DropKernelFull       // for a port's kernel interface, whose ring was full

	numStats
)

// firstDrop is the first drop counter.
const firstDrop = DropBadEthernet

var statNames = [numStats]string{
	RxPackets: "rx_packets", RxBytes: "rx_bytes", TxPackets: "tx_packets", TxBytes: "tx_bytes",
	NewConns: "new_conns", Conns: "conns", ARPReplies: "arp_replies", ARPReceived: "arp_received", ARPRequests: "arp_requests",
	EventsLost: "events_lost", MbufAllocFailed: "mbuf_alloc_failed", Encapsulated: "encapsulated", ICMPEchoReplies: "icmp_echo_replies",
	ICMPErrors: "icmp_errors", ICMPFragNeeded: "icmp_frag_needed", HandedOff: "handed_off", HandedIn: "handed_in", TxHandedOff: "tx_handed_off", ProbesSent: "probes_sent", ProbeAnswers: "probe_answers", Templates: "templates", TemplatesLost: "templates_lost", Iterations: "iterations", BusyNanos: "busy_nanoseconds", LoopNanos: "loop_nanoseconds", IdleSleeps: "idle_sleeps", Evictions: "evictions", ShortTimeouts: "short_timeouts", DefenseSecure: "secure", DefenseDrop: "drop_entry", ICMPTimeExceeded: "icmp_time_exceeded", CsumOffloaded: "tx_checksum_offloaded",
	SyncRecords: "sync_records", SyncRingFull: "sync_ring_full", GratuitousARPs: "gratuitous_arps",
	Fragments: "fragments", FragmentsHeld: "fragments_held",
	FTPRewritten: "ftp_rewritten", FTPExpected: "ftp_expected", FTPDataConns: "ftp_data_conns",
	ProxyHeaders: "proxy_headers", TOAOptions: "toa_options", TOANoRoom: "toa_no_room", UOAOptions: "uoa_options", UOAAlone: "uoa_alone",
	SynCookiesSent: "syn_cookies_sent", SynCookiesValid: "syn_cookies_valid", SynProxyHeld: "synproxy_held", SynProxyDeferred: "synproxy_deferred",
	LoopMaxNanos: "loop_max_nanoseconds", StageRxCycles: "stage_rx_cycles", StageParseCycles: "stage_parse_cycles",
	StageLookupCycles: "stage_lookup_cycles", StageProcessCycles: "stage_process_cycles", StageTxCycles: "stage_tx_cycles",
	NDAdverts: "nd_adverts", NDReceived: "nd_received", ICMPv6EchoReplies: "icmpv6_echo_replies", NDSolicits: "nd_solicits",
	ICMPv6TooBig: "icmpv6_too_big", ICMPv6HopLimit: "icmpv6_time_exceeded", Steered: "steered", ToKernel: "to_kernel", FromKernel: "from_kernel",
	DropBadEthernet: "bad_ethernet", DropMultiSegment: "multi_segment", DropNotIPv4: "not_ipv4",
	DropBadARP: "bad_arp", DropARPNotOurs: "arp_not_ours", DropBadIPv4: "bad_ipv4",
	DropBadIPChecksum: "bad_ip_checksum", DropFragment: "fragment", DropBadL4: "bad_l4",
	DropUnsupportedProto: "unsupported_proto", DropBadICMP: "bad_icmp", DropICMPType: "icmp_type", DropToLocal: "to_local", DropNoService: "no_service",
	DropNotSYN: "not_syn", DropNoDest: "no_dest", DropTableFull: "table_full",
	DropConnExists: "conn_exists", DropNoConn: "no_conn", DropNoRoute: "no_route",
	DropNoNeighbour: "no_neighbour", DropTxFull: "tx_full", DropTooBig: "too_big", DropNoHeadroom: "no_headroom", DropHandoffFull: "handoff_full", DropDestDown: "dest_down",
	DropNotOurMAC: "not_our_mac", DropARPConflict: "arp_conflict", DropTTLExpired: "ttl_expired", DropProbeSpoofed: "probe_spoofed",
	DropBadFragment: "bad_fragment", DropFragOversize: "fragment_oversize", DropFragTableFull: "fragment_table_full",
	DropFragHeldFull: "fragment_held_full", DropFragTimeout: "fragment_timeout", DropFragOrphan: "fragment_orphan",
	DropFTPUnparsed: "ftp_unparsed", DropFTPExpectFull: "ftp_expect_full", DropFTPTableFull: "ftp_table_full",
	DropNoLocalPort:      "no_local_port",
	DropSynCookieInvalid: "syn_cookie_invalid", DropSynProxyPending: "synproxy_pending",
	DropBadIPv6: "bad_ipv6", DropIPv6ExtHeader: "ipv6_ext_header", DropIPv6Unserved: "ipv6_unserved",
	DropBadND: "bad_nd", DropNDNotOurs: "nd_not_ours", DropFragShifted: "fragment_shifted",
	DropFragNoChecksum: "fragment_no_checksum", DropClientBlocked: "client_blocked", DropClientNotAllowed: "client_not_allowed", DropKernelFull: "kernel_full",
}

func init() {
	for i := range LoopBuckets {
		statNames[LoopIterations0+Stat(i)] = loopBucketName(i)
	}
}

// Name is the counter's name (for drops, the reason).
func (s Stat) Name() string { return statNames[s] }

// IsDefense reports whether s is one of the table defense's on/off gauges.
func (s Stat) IsDefense() bool { return s == DefenseSecure || s == DefenseDrop }

// IsDrop reports whether s counts dropped packets.
func (s Stat) IsDrop() bool { return s >= firstDrop }

// NumStats is the number of lcore counters; Stat values are 0..NumStats-1.
const NumStats = int(numStats)

// Stats is a copy of an lcore's counters.
type Stats [numStats]uint64

// DestStat names a per-real-server counter.
type DestStat int

const (
	DestConns       DestStat = iota // connections scheduled to it
	DestInPkts                      // client -> server packets
	DestOutPkts                     // server -> client packets
	DestInBytes                     //
	DestOutBytes                    //
	DestActive                      // connections in ESTABLISHED (a gauge)
	DestInactive                    // connections in other states (a gauge)
	DestPersistent                  // persistence templates naming it (a gauge)
	DestEstablished                 // TCP connections that reached ESTABLISHED (passive health checks)
	numDestStats
)

// DestStats are one real server's counters on one lcore.
type DestStats [numDestStats]uint64

// counters is an lcore's private counting memory and its published copy.
type counters struct {
	own     Stats
	dest    []DestStats // indexed by sched.Dest.ID, private
	pub     [numStats]atomic.Uint64
	destPub [][numDestStats]atomic.Uint64
}

func newCounters() *counters {
	return &counters{
		dest:    make([]DestStats, MaxDests),
		destPub: make([][numDestStats]atomic.Uint64, MaxDests),
	}
}

// publish copies the private counters for readers: the lcore's, and
// those of the real servers ids lists (Snapshot.Counted), so its cost
// follows the servers in use.
func (c *counters) publish(ids []uint32) {
	for i := range c.own {
		c.pub[i].Store(c.own[i])
	}
	for _, id := range ids {
		if id >= MaxDests {
			continue
		}
		for j := range c.dest[id] {
			c.destPub[id][j].Store(c.dest[id][j])
		}
	}
}

// reset zeroes the counters of ids, given to new (service, server) pairs.
func (c *counters) reset(ids []uint32) {
	for _, id := range ids {
		if id < MaxDests {
			c.dest[id] = DestStats{}
		}
	}
}

func (c *counters) read() Stats {
	var s Stats
	for i := range s {
		s[i] = c.pub[i].Load()
	}
	return s
}

func (c *counters) readDest(id uint32) DestStats {
	var s DestStats
	if id >= MaxDests {
		return s
	}
	for j := range s {
		s[j] = c.destPub[id][j].Load()
	}
	return s
}

// Active and Inactive give schedulers this lcore's connection counts of a
// real server (sched.Counts).
func (c *counters) Active(id uint32) uint32 {
	if id >= MaxDests {
		return 0
	}
	return uint32(c.dest[id][DestActive])
}

// Inactive implements sched.Counts.
func (c *counters) Inactive(id uint32) uint32 {
	if id >= MaxDests {
		return 0
	}
	return uint32(c.dest[id][DestInactive])
}
