package ctl

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
)

// fieldRE splits a configuration path of a service setting.
var fieldRE = regexp.MustCompile(`^services\[(\d+)\](?:\.servers\[(\d+)\])?(?:\.([a-z_]+)(?:\[\d+\])?)?$`)

// flagOf names the ipvsadm option of a configuration field.
var flagOf = map[string]string{
	"scheduler": "-s", "sched_flags": "-b", "persistence": "-p", "netmask": "-M",
	"weight": "-w", "upper_threshold": "-x", "lower_threshold": "-y", "forward": "-g|-i|-m|--fullnat",
	"local_addresses": "-z", "blocklist": "-k", "allowlist": "-2",

	"timeouts.tcp": "--set tcp", "timeouts.tcp_fin": "--set tcpfin", "timeouts.udp": "--set udp",
}

// explain turns a refusal of Apply, which names configuration fields,
// into one that names the service, the server and the option.
func explain(err error, svcs []conf.Service) error {
	field, msg, ok := strings.Cut(err.Error(), ": ")
	var fe *conf.FieldError
	if errors.As(err, &fe) {
		field, msg, ok = fe.Field, fe.Msg, true
	}
	if !ok {
		return err
	}
	if f, ok := flagOf[field]; ok {
		return fmt.Errorf("%s: %s", f, msg)
	}
	m := fieldRE.FindStringSubmatch(field)
	if m == nil {
		return err
	}
	i, _ := strconv.Atoi(m[1])
	if i >= len(svcs) {
		return err
	}
	s := svcs[i]
	name := api.ServiceSpec{Protocol: s.Protocol, VIP: s.VIP, Port: s.Port}.String()
	if m[2] != "" {
		j, _ := strconv.Atoi(m[2])
		if j >= len(s.Servers) {
			return err
		}
		name += fmt.Sprintf(" -r %s:%d", s.Servers[j].Address, s.Servers[j].Port)
	}
	if f, ok := flagOf[m[3]]; ok {
		return fmt.Errorf("%s: %s: %s", name, f, msg)
	}
	return fmt.Errorf("%s: %s", name, msg)
}
