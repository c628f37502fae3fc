package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// MaxResponseBytes is the largest response Call reads.
const MaxResponseBytes = 64 << 20

// Call sends req to the lbd listening on path and returns its response.
// A zero req.Version is replaced by Version.
//
// Errors: ErrNotRunning (wrapped, naming path) when nothing listens on path;
// *RemoteError when lbd answered with Response.Error, in which case the
// Response is returned as well. The exchange is bounded by ctx's deadline,
// or by DefaultTimeout when ctx has none.
func Call(ctx context.Context, path string, req Request) (Response, error) {
	if req.Version == 0 {
		req.Version = Version
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	switch {
	case errors.Is(err, syscall.ENOENT):
		return Response{}, fmt.Errorf("%w: no socket at %s", ErrNotRunning, path)
	case errors.Is(err, syscall.ECONNREFUSED):
		return Response{}, fmt.Errorf("%w: nothing listens on %s", ErrNotRunning, path)
	case errors.Is(err, syscall.EACCES):
		return Response{}, fmt.Errorf("cannot connect to %s (run as root or as a member of lbd's group): %w", path, err)
	case err != nil:
		return Response{}, fmt.Errorf("cannot connect to %s: %w", path, err)
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	if err := c.SetDeadline(deadline); err != nil {
		return Response{}, fmt.Errorf("%s: %w", path, err)
	}
	// Cancelling ctx interrupts a blocked read or write.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	// lbd refuses a peer it does not trust before reading its request and
	// closes the connection, so the write may fail (EPIPE) with the
	// refusal already waiting to be read: read it before giving up.
	werr := json.NewEncoder(c).Encode(req)
	var resp Response
	if err := json.NewDecoder(io.LimitReader(c, MaxResponseBytes)).Decode(&resp); err != nil {
		if werr != nil {
			return Response{}, fmt.Errorf("sending request to %s: %w", path, werr)
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return Response{}, fmt.Errorf("reading response from %s: %w", path, err)
	}
	if resp.Error != "" {
		return resp, &RemoteError{Msg: resp.Error}
	}
	if resp.Version != Version {
		return resp, fmt.Errorf("API version mismatch: lbd answered with v%d, lbctl speaks v%d", resp.Version, Version)
	}
	return resp, nil
}
