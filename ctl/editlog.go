package ctl

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/ctl/api"
)

// maxEdits bounds the edits Ops remembers for api.OpEdits.
const maxEdits = 1000

// unknownAuthor stands for a caller that said nothing of itself (an
// in-process caller other than the socket, the console or the signal).
var unknownAuthor = api.Author{User: "unknown", Via: "internal"}

// authorOf is who sent the request ctx belongs to.
func authorOf(ctx context.Context) api.Author {
	if a, ok := api.AuthorOf(ctx); ok {
		return a
	}
	return unknownAuthor
}

// authorFields are the log fields naming an author.
func authorFields(a api.Author) []zap.Field {
	return []zap.Field{zap.String("user", a.User), zap.String("via", a.Via)}
}

// isEdit tells the requests that change something, which the edit log
// keeps.
func isEdit(op string) bool {
	switch op {
	case api.OpList, api.OpSave, api.OpConnections, api.OpEdits, api.OpDaemons, api.OpGetLaddr,
		api.OpGetBlklst, api.OpGetWhtlst, api.OpLinks, api.OpHACheck:
		return false
	case api.OpTimeouts, api.OpDiff, api.OpTrace: // they only look
		return false
	}
	return true
}

// recordEdit remembers one edit and how it went; the caller holds mu.
func (o *Ops) recordEdit(a api.Author, req api.Request, resp api.Response) {
	o.editSeq++
	result := "ok"
	if resp.Error != "" {
		result = "refused: " + resp.Error
	}
	o.edits = append(o.edits, api.Edit{Seq: o.editSeq, Time: time.Now(), User: a.User, Via: a.Via, Op: req.Op,
		Target: editTarget(req), Result: result})
	if len(o.edits) > maxEdits {
		o.edits = slices.Delete(o.edits, 0, len(o.edits)-maxEdits)
	}
}

// editTarget names what a request is about, as lbctl's options do.
func editTarget(req api.Request) string {
	var parts []string
	if req.Service != nil {
		parts = append(parts, req.Service.String())
	}
	if req.Server != nil {
		parts = append(parts, "-r "+serverName(*req.Server))
		if req.Server.Weight != nil {
			parts = append(parts, "-w "+strconv.Itoa(*req.Server.Weight))
		}
	}
	if req.LocalAddress != "" {
		parts = append(parts, "-z "+req.LocalAddress)
	}
	if req.ClientPrefix != "" {
		_, flag := clientList(req.Op)
		parts = append(parts, flag+" "+req.ClientPrefix)
	}
	if req.Timeouts != nil {
		parts = append(parts, "--set "+strconv.Itoa(req.Timeouts.TCP)+" "+strconv.Itoa(req.Timeouts.TCPFin)+" "+strconv.Itoa(req.Timeouts.UDP))
	}
	if d := req.Daemon; d != nil {
		parts = append(parts, d.Mode)
		if d.McastInterface != "" {
			parts = append(parts, "--mcast-interface "+d.McastInterface)
		}
		if d.SyncID != nil {
			parts = append(parts, "--syncid "+strconv.Itoa(*d.SyncID))
		}
	}
	if req.HAState != "" {
		parts = append(parts, "--ha-state "+req.HAState)
	}
	if req.Op == api.OpRestore {
		parts = append(parts, strconv.Itoa(strings.Count(req.Text, "\n"))+" lines")
	}
	return strings.Join(parts, " ")
}
