package health

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/dplb/dplb/conf"
)

// maxSMTPReply bounds what an SMTP check reads of one reply (RFC 5321
// allows 512 bytes a line; a greeting may have a few).
const maxSMTPReply = 4096

// probeSMTP is keepalived's SMTP_CHECK: the server's greeting must be a
// 220, its answer to HELO a 250; then the check says QUIT and closes.
func probeSMTP(ctx context.Context, t Target) (bool, string) {
	c := t.Check
	conn, err := dialer(c, "tcp").DialContext(ctx, "tcp", t.ProbeAddr().String())
	if err != nil {
		return false, dialReason(ctx, err, c.Timeout)
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	r := bufio.NewReader(io.LimitReader(conn, 2*maxSMTPReply)) // two replies at most
	if reason := smtpExpect(ctx, c, r, 220, "greeting"); reason != "" {
		return false, reason
	}
	if _, err := fmt.Fprintf(conn, "HELO %s\r\n", heloName(c.HeloName)); err != nil {
		return false, "SMTP HELO: " + errReason(ctx, err, c.Timeout)
	}
	if reason := smtpExpect(ctx, c, r, 250, "answer to HELO"); reason != "" {
		return false, reason
	}
	io.WriteString(conn, "QUIT\r\n") // a courtesy: the server's 221 is not awaited
	return true, ""
}

// smtpExpect reads one reply (its lines "NNN-text" up to the last,
// "NNN text") and, unless its code is want, says why it fails; what names
// the reply in that reason.
func smtpExpect(ctx context.Context, c conf.HealthCheck, r *bufio.Reader, want int, what string) string {
	var text []string
	read := 0
	for {
		line, err := r.ReadString('\n')
		read += len(line)
		if err != nil {
			if read > 0 && err == io.EOF {
				return fmt.Sprintf("SMTP %s cut short", what)
			}
			return "SMTP " + what + ": " + errReason(ctx, err, c.Timeout)
		}
		if read > maxSMTPReply {
			return fmt.Sprintf("SMTP %s longer than %d bytes", what, maxSMTPReply)
		}
		line = strings.TrimRight(line, "\r\n")
		code, err := strconv.Atoi(line[:min(3, len(line))])
		if err != nil || len(line) < 3 || code < 100 || code > 599 || (len(line) > 3 && line[3] != ' ' && line[3] != '-') {
			return truncate(fmt.Sprintf("SMTP %s is not an SMTP reply: %q", what, line))
		}
		text = append(text, strings.TrimSpace(line[min(4, len(line)):]))
		if len(line) > 3 && line[3] == '-' {
			continue
		}
		if code != want {
			return truncate(fmt.Sprintf("SMTP %s %d %s, want %d", what, code, strings.Join(text, " "), want))
		}
		return ""
	}
}

// heloName is the name the check gives in HELO: the configured one, or
// this host's.
func heloName(configured string) string {
	if configured != "" {
		return configured
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "localhost"
}
