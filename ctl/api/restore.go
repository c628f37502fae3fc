package api

import (
	"fmt"
	"strings"
)

// ParseRestore parses ipvsadm -R input: one command per line, optionally
// starting with "ipvsadm"; blank lines and lines starting with '#' are
// skipped. Only commands that change the table are allowed (-A -E -D -a
// -e -d -C --set, and the local address and client list verbs). Errors
// name the line.
func ParseRestore(text string) ([]Request, error) {
	var out []Request
	for n, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if fields[0] == "ipvsadm" {
			fields = fields[1:]
		}
		c, err := ParseArgs(fields)
		if err == nil {
			err = checkRestoreLine(c)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		out = append(out, c.Request)
	}
	return out, nil
}

func checkRestoreLine(c Command) error {
	switch c.Op {
	case OpAddService, OpEditService, OpDeleteService, OpAddServer, OpEditServer, OpDeleteServer, OpClear, OpSetTimeouts,
		OpAddLaddr, OpDelLaddr, OpAddBlklst, OpDelBlklst, OpAddWhtlst, OpDelWhtlst:
	default:
		return fmt.Errorf("%s is not allowed in a restore file", cmdLabel(c.Op))
	}
	for _, o := range c.Options {
		if o == "-o" || o == "--socket" {
			return fmt.Errorf("option %s is not allowed in a restore file", o)
		}
	}
	return nil
}
