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
)

// Request is what lbctl sends to lbd.
type Request struct {
	Version int    `json:"version"` // must equal Version; Call fills it in when zero
	Op      string `json:"op"`      // one of the Op* constants
}

// Response is what lbd answers. When Error is set the other fields are to be
// ignored.
type Response struct {
	Version  int       `json:"version"`
	Error    string    `json:"error,omitempty"` // one-line refusal, for a human
	Info     *Info     `json:"info,omitempty"`
	Services []Service `json:"services,omitempty"`
}

// Info describes the load balancer as a whole, like ipvsadm's first line.
type Info struct {
	ConnTableSize uint64 `json:"conn_table_size"` // capacity of the connection table
	Connections   uint64 `json:"connections"`     // entries in use
}

// Service is one virtual service (ipvsadm -A).
type Service struct {
	Protocol  string       `json:"protocol"` // "TCP" | "UDP"
	VIP       string       `json:"vip"`      // numeric IPv4 or IPv6 address
	Port      uint16       `json:"port"`
	Scheduler string       `json:"scheduler"` // "rr", "wrr", "mh", ...
	Stats     Stats        `json:"stats"`
	Servers   []RealServer `json:"servers"`
}

// RealServer is one destination of a Service (ipvsadm -a).
type RealServer struct {
	Address       string `json:"address"` // numeric IPv4 or IPv6 address
	Port          uint16 `json:"port"`
	Forward       string `json:"forward"` // "Masq" | "Route" | "Tunnel", as ipvsadm prints
	Weight        int    `json:"weight"`
	ActiveConns   uint64 `json:"active_conns"`
	InactiveConns uint64 `json:"inactive_conns"`
	Stats         Stats  `json:"stats"`
}

// Stats are cumulative counters since the service or server was added.
type Stats struct {
	Conns    uint64 `json:"conns"`
	InPkts   uint64 `json:"in_pkts"`
	OutPkts  uint64 `json:"out_pkts"`
	InBytes  uint64 `json:"in_bytes"`
	OutBytes uint64 `json:"out_bytes"`
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
