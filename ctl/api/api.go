// Package api holds the versioned request and response types that lbctl and
// lbd exchange over lbd's Unix control socket, plus the server (lbd side)
// and the client (lbctl side).
//
// Wire format: the client connects to a SOCK_STREAM Unix socket, writes one
// Request as a single line of JSON, and reads one Response as a single line
// of JSON. One request per connection. The server checks the peer's
// credentials (SO_PEERCRED) before it reads anything.
package api

import (
	"context"
	"errors"
	"time"
)

// Version is the API version spoken by this build. A server refuses requests
// that carry any other version; bump it on any incompatible change.
const Version = 1

// DefaultSocket is where lbd listens and lbctl connects unless told otherwise.
const DefaultSocket = "/run/dplb/lbd.sock"

// Operations understood by lbd. New operations get a constant here and, if
// they need arguments, new optional fields in Request.
const (
	// OpList returns Info and every Service with its real servers and stats.
	OpList = "list"
	// OpAddService adds Request.Service (ipvsadm -A); it must not exist.
	OpAddService = "add-service"
	// OpEditService changes the fields of Request.Service that are set
	// (ipvsadm -E); the others keep their values.
	OpEditService = "edit-service"
	// OpDeleteService removes Request.Service and its servers (ipvsadm -D).
	OpDeleteService = "delete-service"
	// OpAddServer adds Request.Server to Request.Service (ipvsadm -a).
	OpAddServer = "add-server"
	// OpEditServer changes the fields of Request.Server that are set
	// (ipvsadm -e); the others keep their values.
	OpEditServer = "edit-server"
	// OpDeleteServer removes Request.Server from Request.Service (ipvsadm -d).
	OpDeleteServer = "delete-server"
	// OpClear removes every service (ipvsadm -C).
	OpClear = "clear"
	// OpZero zeroes the counters of Request.Service, or of every service
	// when it is nil (ipvsadm -Z).
	OpZero = "zero"
	// OpSetTimeouts sets the non-zero fields of Request.Timeouts
	// (ipvsadm --set tcp tcpfin udp).
	OpSetTimeouts = "set-timeouts"
	// OpSave returns the services as ipvsadm -S -n prints them, in
	// Response.Text.
	OpSave = "save"
	// OpRestore applies Request.Text, lines in ipvsadm's rule format
	// (ipvsadm -R), as one update: all of it or nothing.
	OpRestore = "restore"
	// OpReload re-reads lbd's configuration file and applies its services
	// and timeouts; settings that need a restart and differ are listed in
	// Response.Restart.
	OpReload = "reload"
	// OpConnections lists connections (ipvsadm -L -c).
	OpConnections = "connections"
	// OpEdits returns the edits lbd was asked for, in Response.Edits,
	// oldest first: who asked, how, and how it went.
	OpEdits = "edits"
	// OpUpgrade hands lbd's ports, connections and counters over to a new
	// binary (Request.Binary; "" is the one lbd was started from), which
	// lbd checks first. lbd answers with the binary's path in
	// Response.Text, then stops forwarding and execs it; the new lbd
	// answers with a later Info.Started.
	OpUpgrade = "upgrade"
	// OpHAState makes lbd the master or the backup of its pair when
	// Request.HAState is set ("master" or "backup"), and returns the
	// state in Response.HAState.
	OpHAState = "ha-state"
	// OpStartDaemon starts a connection sync daemon (ipvsadm
	// --start-daemon): Request.Daemon's mode, interface and syncid.
	OpStartDaemon = "start-daemon"
	// OpStopDaemon stops Request.Daemon.Mode's sync daemon.
	OpStopDaemon = "stop-daemon"
	// OpDaemons lists the running sync daemons (ipvsadm -L --daemon) in
	// Response.Daemons.
	OpDaemons = "daemons"
	// OpAddLaddr adds Request.LocalAddress to Request.Service's FullNAT
	// local addresses (DPVS's ipvsadm --add-laddr, -P).
	OpAddLaddr = "add-laddr"
	// OpDelLaddr removes Request.LocalAddress from them (--del-laddr,
	// -Q): new connections stop using it, the ones that do drain.
	OpDelLaddr = "del-laddr"
	// OpGetLaddr lists the local addresses of Request.Service, or of every
	// service when it is nil, in Response.LocalAddresses (--get-laddr, -G).
	OpGetLaddr = "get-laddr"
	// OpAddBlklst adds Request.ClientPrefix to Request.Service's blocklist
	// (DPVS's ipvsadm --add-blklst): the clients it names get no new
	// connection.
	OpAddBlklst = "add-blklst"
	// OpDelBlklst removes Request.ClientPrefix from it (--del-blklst).
	OpDelBlklst = "del-blklst"
	// OpGetBlklst lists the blocklist of Request.Service, or of every
	// service when it is nil, in Response.ClientLists (--get-blklst).
	OpGetBlklst = "get-blklst"
	// OpAddWhtlst, OpDelWhtlst and OpGetWhtlst are the same for the
	// allowlist (--add-whtlst, --del-whtlst, --get-whtlst): when it is
	// not empty, only the clients it names get new connections.
	OpAddWhtlst = "add-whtlst"
	OpDelWhtlst = "del-whtlst"
	OpGetWhtlst = "get-whtlst"
)

// Request is what lbctl sends to lbd. Op says which of the optional
// fields are read.
type Request struct {
	Version  int           `json:"version"`            // must equal Version; Call fills it in when zero
	Op       string        `json:"op"`                 // one of the Op* constants
	DryRun   bool          `json:"dry_run,omitempty"`  // OpRestore: check the rules, answer Response.Changes, apply nothing (-R --dry-run)
	Reply    string        `json:"reply,omitempty"`    // OpTrace: the real server's address:port, to trace its reply (Client: the client's address:port)
	Service  *ServiceSpec  `json:"service,omitempty"`  // the service an op is about
	Server   *ServerSpec   `json:"server,omitempty"`   // the real server an op is about
	Timeouts *TimeoutsSpec `json:"timeouts,omitempty"` // OpSetTimeouts
	Text     string        `json:"text,omitempty"`     // OpRestore: rules in ipvsadm -S format
	Client   string        `json:"client,omitempty"`   // OpConnections: only this client address
	Binary   string        `json:"binary,omitempty"`   // OpUpgrade: the new lbd binary
	// LocalAddress (OpAddLaddr, OpDelLaddr) is a FullNAT local address (-z).
	LocalAddress string `json:"local_address,omitempty"`
	// ClientPrefix (OpAddBlklst, OpDelBlklst, OpAddWhtlst, OpDelWhtlst)
	// is a client address or prefix (-k, -2).
	ClientPrefix string `json:"client_prefix,omitempty"`

	// HAState (OpHAState): "master" or "backup"; "" only reads the state.
	HAState string      `json:"ha_state,omitempty"`
	Daemon  *DaemonSpec `json:"daemon,omitempty"` // OpStartDaemon, OpStopDaemon
}

// ServiceSpec names a virtual service and, for add and edit, its settings.
// A nil field is the default for add and unchanged for edit.
type ServiceSpec struct {
	Protocol    string    `json:"protocol"`              // "tcp" | "udp"
	VIP         string    `json:"vip"`                   // IPv4 address
	Port        int       `json:"port"`                  // 0..65535 (0: every port of the VIP, persistent)
	Scheduler   *string   `json:"scheduler,omitempty"`   // -s; default "rr"
	Persistence *uint32   `json:"persistence,omitempty"` // -p, seconds, 0 = off; default off
	Netmask     *string   `json:"netmask,omitempty"`     // -M; default 255.255.255.255
	SchedFlags  *[]string `json:"sched_flags,omitempty"` // -b; default none
	SloppyTCP   *bool     `json:"sloppy_tcp,omitempty"`  // --sloppy-tcp / --no-sloppy-tcp; default off
	SynProxy    *bool     `json:"synproxy,omitempty"`    // --synproxy, --no-synproxy; default off
	OnePacket   *bool     `json:"one_packet,omitempty"`  // --ops (ipvsadm -o), --no-ops; default off
	QUIC        *bool     `json:"quic,omitempty"`        // --quic, --no-quic (DPVS's ipvsadm --quic); default off
}

// ServerSpec names a real server of a service and, for add and edit, its
// settings. A nil field is the default for add and unchanged for edit.
type ServerSpec struct {
	Address string  `json:"address"`           // IPv4 address
	Port    int     `json:"port"`              // 0 = the service's port
	Forward *string `json:"forward,omitempty"` // "nat" (-m), "dr" (-g), "tun" (-i), "fullnat" (--fullnat); default "nat"
	Weight  *int    `json:"weight,omitempty"`  // -w, 0..65535; default 1
	Upper   *int    `json:"upper,omitempty"`   // -x, 0..1000000, 0 = no limit; default 0
	Lower   *int    `json:"lower,omitempty"`   // -y, 0..upper; default 0
}

// TimeoutsSpec is ipvsadm --set: seconds, 0 keeps the current value.
type TimeoutsSpec struct {
	TCP    int `json:"tcp"`
	TCPFin int `json:"tcp_fin"`
	UDP    int `json:"udp"`
}

// Response is what lbd answers. When Error is set the other fields are to be
// ignored.
type Response struct {
	Version  int        `json:"version"`
	Error    string     `json:"error,omitempty"` // one-line refusal, for a human
	Info     *Info      `json:"info,omitempty"`
	Services []Service  `json:"services,omitempty"`
	SNAT     []SNATRule `json:"snat,omitempty"` // OpList: the configuration's SNAT rules (configured in the file only: -S leaves them out)
	Lcores   []Lcore    `json:"lcores,omitempty"`
	Runtime  *Runtime   `json:"runtime,omitempty"` // with Lcores
	Conns    []Conn     `json:"conns,omitempty"`   // OpConnections

	// Timeouts (OpTimeouts) are the running connection timeouts, seconds.
	Timeouts *TimeoutsSpec `json:"timeouts,omitempty"`
	// Changes (OpDiff, OpRestore with DryRun) are what the rules would
	// change, services first; none when they change nothing.
	Changes []Change `json:"changes,omitempty"`
	Trace   *Trace   `json:"trace,omitempty"` // OpTrace

	// ConnsTruncated: more connections matched than one answer lists.
	ConnsTruncated bool     `json:"conns_truncated,omitempty"`
	Text           string   `json:"text,omitempty"`    // OpSave: the rules
	Restart        []string `json:"restart,omitempty"` // OpReload: settings that differ from the running ones and need a restart
	Edits          []Edit   `json:"edits,omitempty"`   // OpEdits

	// HAState (OpHAState, OpHACheck): "master" or "backup".
	HAState string `json:"ha_state,omitempty"`
	// Links (OpLinks, OpHACheck) are the dataplane ports' links.
	Links     []PortLink `json:"links,omitempty"`
	Daemons   []Daemon   `json:"daemons,omitempty"`    // OpDaemons
	SyncPeers []SyncPeer `json:"sync_peers,omitempty"` // OpDaemons: the peers that say hello
	BGP       *BGP       `json:"bgp,omitempty"`        // OpBGP, OpDrain, OpUndrain
	// LocalAddresses (OpGetLaddr) are the services' FullNAT local
	// addresses, and those removed that still drain.
	LocalAddresses []LocalAddress `json:"local_addresses,omitempty"`
	// ClientLists (OpGetBlklst, OpGetWhtlst) are the entries of the
	// services' blocklists or allowlists.
	ClientLists []ClientListEntry `json:"client_lists,omitempty"`
}

// SNATRule is one SNAT rule for one protocol (the configuration's snat,
// DPVS's SNAT mode): the real servers' own connections from Source leave
// from Addresses.
type SNATRule struct {
	Protocol      string   `json:"protocol"` // "TCP" | "UDP" | "ICMP"
	Source        string   `json:"source"`   // an IPv4 prefix
	Addresses     []string `json:"addresses"`
	ActiveConns   uint64   `json:"active_conns"`
	InactiveConns uint64   `json:"inactive_conns"`
	Stats         Stats    `json:"stats"` // in: from the servers, out: the answers
}

// LocalAddress is one FullNAT local address of a service (OpGetLaddr).
type LocalAddress struct {
	Protocol string `json:"protocol"` // "TCP" | "UDP"
	VIP      string `json:"vip"`
	Port     uint16 `json:"port"`
	Address  string `json:"address"`
	// Draining: removed (--del-laddr) while connections may still use it;
	// lbd answers ARP for it until none does. Its service is the one it
	// was removed from.
	Draining bool `json:"draining,omitempty"`
}

// The client lists of a service (ClientListEntry.List).
const (
	Blocklist = "blocklist"
	Allowlist = "allowlist"
)

// ClientListEntry is one entry of a service's blocklist or allowlist
// (OpGetBlklst, OpGetWhtlst).
type ClientListEntry struct {
	Protocol string `json:"protocol"` // "TCP" | "UDP"
	VIP      string `json:"vip"`
	Port     uint16 `json:"port"`
	List     string `json:"list"`   // Blocklist | Allowlist
	Prefix   string `json:"prefix"` // an address ("192.0.2.7") or a prefix ("198.51.100.0/24")
}

// Edit is one edit or reload lbd was asked for (OpEdits).
type Edit struct {
	Seq    uint64    `json:"seq"` // grows by one per edit since lbd started
	Time   time.Time `json:"time"`
	User   string    `json:"user"`   // the author: a Unix user, a console user, "signal"
	Via    string    `json:"via"`    // ViaSocket, ViaConsole, ViaSignal
	Op     string    `json:"op"`     // one of the Op* constants
	Target string    `json:"target"` // what it was about, as lbctl names it
	Result string    `json:"result"` // "ok", or "refused: " and lbd's message
}

// Lcore is one worker lcore's counters (lbctl -L --per-lcore).
type Lcore struct {
	ID          int    `json:"id"`
	RxPackets   uint64 `json:"rx_packets"`
	TxPackets   uint64 `json:"tx_packets"`
	Drops       uint64 `json:"drops"` // all reasons
	HandedOff   uint64 `json:"handed_off"`
	HandedIn    uint64 `json:"handed_in"`
	Connections uint64 `json:"connections"`
	// DropsByReason counts the drops per reason (the reasons of
	// /metrics's dplb_lcore_drops_total); reasons never counted are left out.
	DropsByReason map[string]uint64 `json:"drops_by_reason,omitempty"`
	// Cycle accounting (VPP's show runtime): the share of time spent in
	// bursts that carried packets, and the CPU cycles per packet they cost.
	BusyPercent     float64 `json:"busy_percent"`
	CyclesPerPacket float64 `json:"cycles_per_packet"`
	// Loop accounting, cumulative since lbd started: the longest poll
	// loop iteration, iterations by duration (bucket i below
	// Runtime.BucketBoundsNanos[i]), and the TSC cycles the bursts that
	// carried packets spent per stage (rx, parse, lookup, process, tx).
	// RunQueueWaitSeconds is how long the OS kept the worker's thread
	// waiting for its CPU, Preemptions how often it took it away.
	RunQueueWaitSeconds float64           `json:"run_queue_wait_seconds"`
	Preemptions         uint64            `json:"preemptions"`
	LoopMaxMicros       float64           `json:"loop_max_us"`
	LoopIterations      []uint64          `json:"loop_iterations"`
	StageCycles         map[string]uint64 `json:"stage_cycles"`
	// Jobs are the worker's periodic jobs: runs, time spent, and runs of
	// 16.384 µs or more (a long loop iteration, as the perf report
	// counts them), cumulative.
	Jobs []LcoreJob `json:"jobs,omitempty"`
}

// LcoreJob is one periodic job of a worker (commands, expire, publish).
type LcoreJob struct {
	Name     string  `json:"name"`
	Runs     uint64  `json:"runs"`
	Seconds  float64 `json:"seconds"`
	SlowRuns uint64  `json:"slow_runs"`
}

// Runtime is lbd's Go runtime as runtime/metrics reports it, cumulative
// since lbd started: its garbage collections, the time they stopped the
// world, and its heap.
type Runtime struct {
	GCCycles       uint64  `json:"gc_cycles"`
	GCPauseSeconds float64 `json:"gc_pause_seconds"` // total, estimated from the pause histogram
	// GCPauses counts pauses by duration in the loop iterations' buckets.
	GCPauses          []uint64 `json:"gc_pauses"`
	HeapBytes         uint64   `json:"heap_bytes"` // live and not yet swept heap objects
	GOGC              int      `json:"gogc"`       // 0: off
	MemoryLimitBytes  int64    `json:"memory_limit_bytes"`
	BucketBoundsNanos []int64  `json:"bucket_bounds_ns"` // exclusive upper bounds; the last bucket's 0: none
}

// Info describes the load balancer as a whole, like ipvsadm's first line.
type Info struct {
	ConnTableSize uint64 `json:"conn_table_size"` // capacity of the connection table
	Connections   uint64 `json:"connections"`     // entries in use
	// Started is when this lbd started (an upgrade's new binary has a
	// later one); Handover what it made of the connections and counters
	// handed over to it ("" when none was).
	Started  time.Time `json:"started,omitzero"`
	Handover string    `json:"handover,omitempty"`
	// LinksDown names the dataplane ports whose link is down.
	LinksDown []string `json:"links_down,omitempty"`
	// DrainingVIPs are VIPs no configured service has whose connections
	// go on (a removed service's, or one a peer's records named): kept,
	// and answered by a master, while they last.
	DrainingVIPs []string `json:"draining_vips,omitempty"`
}

// Service is one virtual service (ipvsadm -A).
type Service struct {
	Protocol  string `json:"protocol"` // "TCP" | "UDP"
	VIP       string `json:"vip"`      // numeric IPv4 or IPv6 address
	Port      uint16 `json:"port"`
	Scheduler string `json:"scheduler"` // "rr", "wrr", "mh", ...
	// Persistence is the persistence timeout in seconds, 0 when off (-p).
	Persistence uint32   `json:"persistence,omitempty"`
	Netmask     string   `json:"netmask,omitempty"`     // persistence netmask (-M), when not 255.255.255.255
	SchedFlags  []string `json:"sched_flags,omitempty"` // scheduler flags (-b)
	SloppyTCP   bool     `json:"sloppy_tcp,omitempty"`  // any TCP packet opens a connection (--sloppy-tcp)
	SynProxy    bool     `json:"synproxy,omitempty"`    // SYN cookies answer the clients' SYNs (--synproxy)
	OnePacket   bool     `json:"one_packet,omitempty"`  // every datagram scheduled on its own (--ops)
	QUIC        bool     `json:"quic,omitempty"`        // new flows go to the server their QUIC connection ID names (--quic)
	// LocalAddresses are the FullNAT local addresses (local_addresses in
	// the configuration, lbctl --add-laddr and --del-laddr).
	LocalAddresses []string `json:"local_addresses,omitempty"`
	// Blocklist and Allowlist are the client lists (blocklist and
	// allowlist in the configuration, lbctl --add-blklst and
	// --add-whtlst): addresses and prefixes.
	Blocklist []string     `json:"blocklist,omitempty"`
	Allowlist []string     `json:"allowlist,omitempty"`
	Stats     Stats        `json:"stats"`
	Servers   []RealServer `json:"servers"`
	Rates     Rates        `json:"rates"` // --rate: the estimator's rates
}

// RealServer is one destination of a Service (ipvsadm -a).
type RealServer struct {
	Address       string `json:"address"` // numeric IPv4 or IPv6 address
	Port          uint16 `json:"port"`
	Forward       string `json:"forward"` // "Masq" | "Route" | "Tunnel" | "FullNat", as ipvsadm prints
	Weight        int    `json:"weight"`
	Upper         int    `json:"upper,omitempty"` // upper connection threshold (-x), 0 = none
	Lower         int    `json:"lower,omitempty"` // lower connection threshold (-y)
	ActiveConns   uint64 `json:"active_conns"`
	InactiveConns uint64 `json:"inactive_conns"`
	PersistConns  uint64 `json:"persist_conns"` // persistence templates naming it (--persistent-conn)
	// Health is "up" or "down" for a server with a health check, "sorry"
	// for a service's sorry server standing in, "" when nothing checks it.
	Health       string `json:"health,omitempty"`
	HealthReason string `json:"health_reason,omitempty"` // why a down server failed
	Stats        Stats  `json:"stats"`
	Rates        Rates  `json:"rates"` // --rate: the estimator's rates

	// ConfiguredWeight is the weight as configured; Weight is the one the
	// lcores schedule with (0 while down, lower during a slow start,
	// moved by dynamic feedback); the sorry server's is 1. Left out when 0.
	ConfiguredWeight int        `json:"configured_weight,omitempty"`
	Probe            *Probe     `json:"probe,omitempty"`      // the last health probe; nil when none has run
	SlowStart        *SlowStart `json:"slow_start,omitempty"` // set while the weight ramps after a recovery
	Feedback         *Feedback  `json:"feedback,omitempty"`   // set when dynamic feedback polls the server
}

// Probe is the last health probe of a real server.
type Probe struct {
	At      time.Time `json:"at"`
	AgeSecs float64   `json:"age_secs"` // how long before the listing it ended
	Passed  bool      `json:"passed"`
	Reason  string    `json:"reason,omitempty"` // why it failed
	// Probes passed and failed since the check started watching.
	PassedTotal uint64 `json:"passed_total"`
	FailedTotal uint64 `json:"failed_total"`
	// ExitWeight is the weight the exec check's exit status set
	// (weight_from_exit), absent while it set none.
	ExitWeight *int `json:"exit_weight,omitempty"`
	// WeightDelta is what the file checks last added to the weight
	// (file_weight), absent while 0.
	WeightDelta int `json:"weight_delta,omitempty"`
}

// SlowStart is a weight ramping linearly from 1 to TargetWeight over
// DurationSecs after the server came back up.
type SlowStart struct {
	ElapsedSecs  float64 `json:"elapsed_secs"`
	DurationSecs float64 `json:"duration_secs"`
	TargetWeight int     `json:"target_weight"` // the configured weight, as dynamic feedback scales it
}

// Feedback is what dynamic feedback (the server's reported load) makes of
// a real server's weight.
type Feedback struct {
	Weight int     `json:"weight"` // the configured weight scaled by the load; slow start ramps towards it
	Load   float64 `json:"load"`   // the smoothed load reported, percent, 0 before the first answer
	Share  float64 `json:"share"`  // the share of the configured weight applied, 1 before the first answer
	// LastPollAgeSecs: how long before the listing the last poll ended;
	// nil when none has.
	LastPollAgeSecs *float64 `json:"last_poll_age_secs,omitempty"`
	LastError       string   `json:"last_error,omitempty"` // why the last failed poll failed
	Failures        int      `json:"failures,omitempty"`   // consecutive failed polls
}

// Stats are cumulative counters since the service or server was added.
type Stats struct {
	Conns    uint64 `json:"conns"`
	InPkts   uint64 `json:"in_pkts"`
	OutPkts  uint64 `json:"out_pkts"`
	InBytes  uint64 `json:"in_bytes"`
	OutBytes uint64 `json:"out_bytes"`
}

// Rates are per-second rates averaged as IPVS's estimator does
// (net/netfilter/ipvs/ip_vs_est.c): sampled every 2 seconds, smoothed
// exponentially, rounded as ip_vs_read_estimator rounds them. Zero until
// the service or server has been sampled twice.
type Rates struct {
	CPS    uint64 `json:"cps"`     // connections per second
	InPPS  uint64 `json:"in_pps"`  // packets per second, client to server
	OutPPS uint64 `json:"out_pps"` // packets per second, server to client
	InBPS  uint64 `json:"in_bps"`  // bytes per second, client to server
	OutBPS uint64 `json:"out_bps"` // bytes per second, server to client
}

// Handler executes one request that has passed the credential and version
// checks. It reports failures in Response.Error; the server sets
// Response.Version. ctx is cancelled when the server shuts down.
type Handler interface {
	Handle(ctx context.Context, req Request) Response
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req Request) Response

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, req Request) Response { return f(ctx, req) }

// Errors returned by Listen and Call, for errors.Is.
var (
	// ErrSocketInUse: another process answers on the socket path.
	ErrSocketInUse = errors.New("another lbd is serving on the socket")
	// ErrNotSocket: the socket path exists and is not a socket.
	ErrNotSocket = errors.New("path exists and is not a socket")
	// ErrNotRunning: nothing listens on the socket path.
	ErrNotRunning = errors.New("lbd does not seem to be running")
)

// RemoteError is a refusal sent by lbd in Response.Error.
type RemoteError struct {
	Msg string
}

func (e *RemoteError) Error() string { return e.Msg }

// Conn is one connection or persistence template (lbctl -L -c).
type Conn struct {
	Protocol    string `json:"protocol"` // "TCP" | "UDP" | "ICMP" (a server's ping through a SNAT rule: its echo identifiers are the ports)
	State       string `json:"state"`    // IPVS's names: ESTABLISHED, SYN_RECV, ..., UDP, NONE for a template; ICMP for a ping
	Template    bool   `json:"template,omitempty"`
	ExpiresSecs uint64 `json:"expires_secs"`
	Client      string `json:"client"`          // address:port (port 0 for a template)
	Virtual     string `json:"virtual"`         // VIP:port
	Destination string `json:"destination"`     // real server address:port
	Local       string `json:"local,omitempty"` // FullNAT: the local address:port it leaves from
}

// Ways an edit reaches lbd (Author.Via, Edit.Via).
const (
	ViaSocket  = "lbctl"   // a request on the control socket
	ViaConsole = "console" // the browser console
	ViaSignal  = "signal"  // SIGHUP (a reload)
)

// Author is who asked for a request and how. The control socket's server
// puts the peer's Unix user (from SO_PEERCRED) in the request's context;
// other callers of a Handler put their own.
type Author struct {
	User string
	Via  string
}

type authorKey struct{}

// WithAuthor returns ctx carrying a.
func WithAuthor(ctx context.Context, a Author) context.Context {
	return context.WithValue(ctx, authorKey{}, a)
}

// AuthorOf returns the author ctx carries, and whether it carries one.
func AuthorOf(ctx context.Context) (Author, bool) {
	a, ok := ctx.Value(authorKey{}).(Author)
	return a, ok
}
