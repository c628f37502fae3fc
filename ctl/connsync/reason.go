package connsync

import (
	"bytes"
	"fmt"
	"os"
)

// Reason is why a received message was dropped; every reason is a named
// counter.
type Reason uint8

const (
	ReasonNone      Reason = iota
	ReasonLength           // shorter than a header and MAC, longer than MaxMessageLen, or not count records long
	ReasonMagic            // not our magic: not a sync message
	ReasonVersion          // a version this build does not speak
	ReasonKind             // an unknown message kind
	ReasonMalformed        // reserved bits set, records on a control message, a zero boot id or sequence
	ReasonMAC              // the HMAC does not match: forged, corrupted, or another key
	ReasonRecord           // a record with an impossible protocol, state, method or address
	ReasonSyncID           // another sync group's message
	ReasonReplay           // a sequence already received from this sender
	ReasonStale            // older than the sender's window, or from a sender's earlier boot
	ReasonSelf             // our own message, looped back
	ReasonMode             // records while not a backup, or a bulk request while not a master
	ReasonQueueFull        // the receive queue was full (a flood)
	numReasons
)

var reasonNames = [numReasons]string{
	ReasonNone: "none", ReasonLength: "length", ReasonMagic: "magic", ReasonVersion: "version",
	ReasonKind: "kind", ReasonMalformed: "malformed", ReasonMAC: "mac", ReasonRecord: "record",
	ReasonSyncID: "syncid", ReasonReplay: "replay", ReasonStale: "stale", ReasonSelf: "self",
	ReasonMode: "mode", ReasonQueueFull: "queue_full",
}

// String is the reason's metric label.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "invalid"
}

// Reasons lists every drop reason, for exporting counters that start at 0.
func Reasons() []Reason {
	rs := make([]Reason, 0, numReasons-1)
	for r := ReasonNone + 1; r < numReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

func errShortKey(n int) error {
	return fmt.Errorf("sync key is %d bytes; at least %d are needed", n, MinKeyLen)
}

// LoadKey reads the shared key from path (the config's sync.key_file):
// the file's bytes, without a trailing newline. A file other users may
// read or write is refused. field names the setting in errors.
func LoadKey(field, path string) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("%s: connection sync needs a shared key file (messages are authenticated with HMAC-SHA256); none is set", field)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	// Whoever reads the key can install connections in a backup.
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o007 != 0 {
		return nil, fmt.Errorf("%s: %s is open to every user (mode %#o); chmod o-rwx it", field, path, fi.Mode().Perm())
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) < MinKeyLen {
		return nil, fmt.Errorf("%s: %s: %w", field, path, errShortKey(len(b)))
	}
	return b, nil
}
