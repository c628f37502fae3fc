package health_test

import (
	"slices"
	"testing"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/health/bfd"
)

// TestBFDAuthNames: every bfd_auth the configuration takes names a type
// of the bfd package (probeBFD maps one to the other by name), and the
// package names none the configuration refuses.
func TestBFDAuthNames(t *testing.T) {
	for _, name := range conf.BFDAuthTypes {
		if _, ok := bfd.AuthTypes[name]; !ok {
			t.Errorf("bfd_auth %q has no type in package bfd", name)
		}
	}
	for name := range bfd.AuthTypes {
		if name != "" && !slices.Contains(conf.BFDAuthTypes, name) {
			t.Errorf("package bfd's %q is not in conf.BFDAuthTypes", name)
		}
	}
}
