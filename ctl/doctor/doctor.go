// Package doctor checks a host for what lbd needs on bare metal, from
// /proc and /sys only (no DPDK, nothing changed): hugepages, NIC binding,
// the IOMMU, CPU isolation and IRQs, NUMA locality and what can be known
// of the NICs' offloads before DPDK probes them. Each finding says how to
// fix it. The root of /proc and /sys is a parameter, so the checks run
// against fake trees in tests.
package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dplb/dplb/conf"
)

// Status of a finding, in increasing severity.
type Status string

const (
	OK   Status = "ok"
	Info Status = "info" // nothing to fix, worth knowing
	Warn Status = "warn" // works, but costs performance or robustness
	Fail Status = "fail" // lbd will not start or not work as configured
)

// Finding is one check's result.
type Finding struct {
	Check   string `json:"check"`
	Status  Status `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Host is the machine under check: Root is "/" on a real host.
type Host struct {
	Root string
}

func (h Host) path(p string) string { return filepath.Join(h.Root, p) }

// read returns a file's content without surrounding space, "" if absent.
func (h Host) read(p string) string {
	b, err := os.ReadFile(h.path(p))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (h Host) readInt(p string) (int, bool) {
	n, err := strconv.Atoi(h.read(p))
	return n, err == nil
}

// Run checks the host for cfg. cfgErr is the error of loading and
// validating the configuration, if any: then only the host-wide checks run.
func Run(h Host, cfg conf.Config, cfgErr error) []Finding {
	var out []Finding
	if cfgErr != nil {
		return append(out, Finding{"config", Fail, cfgErr.Error(),
			"correct the named field (lbd -check validates without starting)"})
	}
	out = append(out, Finding{Check: "config", Status: OK, Message: "configuration valid"})
	out = append(out, h.hugepages(cfg)...)
	out = append(out, h.nics(cfg)...)
	out = append(out, h.cpus(cfg)...)
	return out
}

// Failed reports whether any finding is a failure (lbd doctor's exit 1).
func Failed(fs []Finding) bool {
	for _, f := range fs {
		if f.Status == Fail {
			return true
		}
	}
	return false
}

// WriteText writes one line per finding, its fix indented below.
func WriteText(w io.Writer, fs []Finding) error {
	for _, f := range fs {
		if _, err := fmt.Fprintf(w, "[%-4s] %-10s %s\n", strings.ToUpper(string(f.Status)), f.Check, f.Message); err != nil {
			return err
		}
		if f.Fix != "" {
			if _, err := fmt.Fprintf(w, "       %-10s fix: %s\n", "", f.Fix); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteJSON writes the findings as a JSON array.
func WriteJSON(w io.Writer, fs []Finding) error {
	if fs == nil {
		fs = []Finding{}
	}
	b, err := json.MarshalIndent(fs, "", "  ")
	if err == nil {
		_, err = w.Write(append(b, '\n'))
	}
	return err
}

// cpuList parses a kernel CPU list ("0-3,8,10-11"); flags such as
// "domain," or "managed_irq," in isolcpus are skipped.
func cpuList(s string) map[int]bool {
	out := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for c := a; c <= b && c-a < 1<<16; c++ {
			out[c] = true
		}
	}
	return out
}

// formatCPUs writes a sorted CPU set as a list ("2,3,5").
func formatCPUs(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}
