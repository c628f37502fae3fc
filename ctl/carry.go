package ctl

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/dplb/dplb/conf"
)

// Services across a restart or an upgrade. What lbctl edits (servers
// added or removed, weights, client lists, local addresses) lives in the
// running table, not in lbd.yaml. The handover carries the running table
// and the configuration's services as the stopping lbd last read them
// (at its start or last reload). The next lbd keeps the running table
// when its configuration's services are those same ones, the file not
// edited in between: a restart or an upgrade then undoes nothing done
// with lbctl, and the connections to a server lbctl added are installed
// with their server instead of being refused as no_dest. When the file's
// services changed, the file wins, as a reload would have it, and the
// log says that lbctl's edits were not kept.

// carriedServices is what the handover carries (handover.State.Services).
type carriedServices struct {
	File            []conf.Service `json:"file"`
	FileTimeouts    conf.Timeouts  `json:"file_timeouts"`
	Running         []conf.Service `json:"running"`
	RunningTimeouts conf.Timeouts  `json:"running_timeouts"`
}

// readFile notes the configuration's services and timeouts as lbd read
// them (at start and on every reload).
func (o *Ops) readFile(svcs []conf.Service, t conf.Timeouts) {
	o.fileMu.Lock()
	defer o.fileMu.Unlock()
	o.file, o.fileTimeouts = svcs, t
}

// servicesHandover encodes the services for the next lbd; nil when they
// cannot be (the next lbd then starts with its configuration's).
func (o *Ops) servicesHandover() []byte {
	o.fileMu.Lock()
	cs := carriedServices{File: o.file, FileTimeouts: o.fileTimeouts}
	o.fileMu.Unlock()
	cs.Running, cs.RunningTimeouts = o.c.Services()
	b, err := json.Marshal(cs)
	if err != nil {
		o.log.Warn("the running services are not handed over: the next lbd starts with its configuration's")
		return nil
	}
	return b
}

// adoptServices makes the services the lbd before ran (b, its
// servicesHandover) the running ones when this lbd's configuration has
// the services that lbd last read; call it before the handed-over
// connections are installed. It returns what it did, for the log ("" when
// there was nothing to do).
func (o *Ops) adoptServices(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var cs carriedServices
	if err := json.Unmarshal(b, &cs); err != nil {
		return fmt.Sprintf("the handed-over services are unreadable (%v): the configuration's apply", err)
	}
	o.fileMu.Lock()
	file, fileTimeouts := o.file, o.fileTimeouts
	o.fileMu.Unlock()
	if !sameJSON(cs.File, file) || cs.FileTimeouts != fileTimeouts {
		return "the configuration's services changed since the lbd before read them: they replace its running table (edits made with lbctl are not kept)"
	}
	if sameJSON(cs.Running, file) && cs.RunningTimeouts == fileTimeouts {
		return "" // nothing was edited
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.apply(cs.Running, cs.RunningTimeouts); err != nil {
		return fmt.Sprintf("the running table of the lbd before was refused (%v): the configuration's services apply", err)
	}
	return fmt.Sprintf("kept the running table of the lbd before, edits made with lbctl included: %d services", len(cs.Running))
}

// sameJSON reports whether a and b encode alike: the services as decoded
// from a handover against those conf.Load made, nil and empty lists
// alike.
func sameJSON(a, b []conf.Service) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	x, errx := json.Marshal(a)
	y, erry := json.Marshal(b)
	return errx == nil && erry == nil && bytes.Equal(x, y)
}
