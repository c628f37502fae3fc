package ctl

import (
	"time"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
)

// Staged changes: lbctl -R --dry-run and lbctl -S --diff FILE compute the
// table a restore would make, check it as an edit is checked (the whole
// set validated and built against the running ports and schedulers), and
// answer what it changes. Nothing is published, logged as an edit or
// given an id.

// timeoutsSpec is t in seconds, as --set takes them.
func timeoutsSpec(t conf.Timeouts) *api.TimeoutsSpec {
	return &api.TimeoutsSpec{TCP: int(t.TCP / time.Second), TCPFin: int(t.TCPFin / time.Second), UDP: int(t.UDP / time.Second)}
}

// staged answers OpRestore with DryRun (the rules applied onto the running
// table, as -R would) and OpDiff (the rules as the whole table, as after
// -C). The caller holds o.mu.
func (o *Ops) staged(req api.Request) (api.Response, error) {
	running, t := o.c.Services()
	svcs, _ := o.c.Services() // a copy of its own: restore modifies what it is given
	if req.Op == api.OpDiff {
		svcs = []conf.Service{}
	}
	nt := t
	next, err := restore(svcs, &nt, req.Text)
	if err != nil {
		return api.Response{}, err
	}
	if err := o.c.check(next, nt); err != nil {
		return api.Response{}, explain(err, next)
	}
	return api.Response{Changes: api.DiffRules(saved(running), saved(next), timeoutsSpec(t), timeoutsSpec(nt))}, nil
}

// check validates and builds svcs and t as Apply would, and publishes
// nothing.
func (c *Controller) check(svcs []conf.Service, t conf.Timeouts) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.validate(svcs, t); err != nil {
		return err
	}
	_, err := c.build(svcs, t)
	return err
}
