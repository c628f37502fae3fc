package keepalived

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dplb/dplb/conf"
)

// YAML writes the services as the services section of an lbd.yaml, in
// lbd.example.yaml's order, leaving out what is lbd's default; source
// names the keepalived.conf in the header.
func (r Result) YAML(source string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# services converted from %s by lbd import-keepalived;\n", source)
	b.WriteString("# add the ports: section (see lbd.yaml(5)) and check with lbd -check\n")
	if len(r.Services) == 0 {
		b.WriteString("services: []\n")
	} else {
		b.WriteString("services:\n")
	}
	for i, s := range r.Services {
		if i < len(r.Origins) {
			fmt.Fprintf(&b, "  # %s\n", r.Origins[i])
		}
		w := &writer{b: &b, prefix: "  - ", indent: "    "}
		w.service(s)
	}
	if len(r.SNAT) > 0 {
		b.WriteString(snatYAML(r.SNAT))
	}
	return b.Bytes()
}

// writer writes the keys of one mapping: the first after prefix (a list
// item's "- "), the others after indent.
type writer struct {
	b              *bytes.Buffer
	prefix, indent string
}

func (w *writer) key(k string) {
	w.b.WriteString(w.prefix)
	w.b.WriteString(k)
	w.b.WriteString(":")
	w.prefix = w.indent
}

func (w *writer) value(k, v string) {
	w.key(k)
	w.b.WriteString(" ")
	w.b.WriteString(v)
	w.b.WriteString("\n")
}

func (w *writer) str(k, v string)           { w.value(k, scalar(v)) }
func (w *writer) int(k string, v int)       { w.value(k, strconv.Itoa(v)) }
func (w *writer) list(k string, v []string) { w.value(k, flow(v)) }

func (w *writer) service(s conf.Service) {
	w.str("protocol", s.Protocol)
	w.str("vip", s.VIP)
	w.int("port", s.Port)
	if s.Scheduler != "rr" {
		w.str("scheduler", s.Scheduler)
	}
	if len(s.SchedFlags) > 0 {
		w.list("sched_flags", s.SchedFlags)
	}
	if s.MHTableSize != 0 && s.MHTableSize != 65537 {
		w.int("mh_table_size", s.MHTableSize)
	}
	if s.Persistence != 0 {
		w.str("persistence", fmtDuration(s.Persistence))
	}
	if s.Netmask != "" && s.Netmask != "255.255.255.255" {
		w.str("netmask", s.Netmask)
	}
	if s.PersistencePrefix != 0 {
		w.int("persistence_prefix", s.PersistencePrefix)
	}
	if len(s.Servers) > 0 {
		w.key("servers")
		w.b.WriteString("\n")
		for _, r := range s.Servers {
			rw := &writer{b: w.b, prefix: w.indent + "  - ", indent: w.indent + "    "}
			rw.server(s, r)
		}
	}
	if len(s.LocalAddresses) > 0 {
		w.list("local_addresses", s.LocalAddresses)
	}
	if s.ProxyProtocol {
		w.value("proxy_protocol", "true")
	}
	if s.TOA {
		w.value("toa", "true")
	}
	if s.UOA != "" {
		w.value("uoa", s.UOA)
	}
	if s.SynProxy {
		w.value("synproxy", "true")
	}
	if s.OnePacket {
		w.value("one_packet", "true")
	}
	if s.QUIC {
		w.value("quic", "true")
	}
	if len(s.Blocklist) > 0 {
		w.list("blocklist", s.Blocklist)
	}
	if len(s.Allowlist) > 0 {
		w.list("allowlist", s.Allowlist)
	}
	if s.SorryServer != "" {
		w.str("sorry_server", s.SorryServer)
	}
	if s.QuorumWeight() != 1 {
		w.int("quorum", s.Quorum)
	}
	if s.Hysteresis != 0 {
		w.int("hysteresis", s.Hysteresis)
	}
	w.health(conf.DefaultHealthCheck(), s.Health)
}

func (w *writer) server(s conf.Service, r conf.RealServer) {
	w.str("address", r.Address)
	if r.Port != s.Port {
		w.int("port", r.Port)
	}
	if r.Weight != 1 {
		w.int("weight", r.Weight)
	}
	if r.Forward != "nat" {
		w.str("forward", r.Forward)
	}
	if r.Upper != 0 {
		w.int("upper_threshold", r.Upper)
	}
	if r.Lower != 0 {
		w.int("lower_threshold", r.Lower)
	}
	if r.Health != nil {
		w.health(s.Health, *r.Health)
	}
}

// health writes the keys of h that differ from base (what it would have
// without them), nothing when none does.
func (w *writer) health(base, h conf.HealthCheck) {
	var keys bytes.Buffer
	hw := &writer{b: &keys, prefix: w.indent + "  ", indent: w.indent + "  "}
	hw.healthKeys(base, h)
	if keys.Len() == 0 {
		return
	}
	w.key("health")
	w.b.WriteString("\n")
	w.b.Write(keys.Bytes())
}

// healthKeys writes the keys of h that differ from base; an also check's
// differ from the defaults Load fills in.
func (hw *writer) healthKeys(base, h conf.HealthCheck) {
	if h.Type != base.Type {
		hw.str("type", h.Type)
	}
	if h.Interval != base.Interval {
		hw.str("interval", fmtDuration(h.Interval))
	}
	if h.Timeout != base.Timeout {
		hw.str("timeout", fmtDuration(h.Timeout))
	}
	if h.Rise != base.Rise {
		hw.int("rise", h.Rise)
	}
	if h.Fall != base.Fall {
		hw.int("fall", h.Fall)
	}
	if h.RetryInterval != base.RetryInterval {
		hw.str("retry_interval", fmtDuration(h.RetryInterval))
	}
	if h.Port != base.Port {
		hw.int("port", h.Port)
	}
	if h.Source != base.Source {
		hw.str("source", h.Source)
	}
	if h.Target != base.Target {
		hw.str("target", h.Target)
	}
	if h.Method != base.Method {
		hw.str("method", h.Method)
	}
	if h.Path != base.Path {
		hw.str("path", h.Path)
	}
	if h.Host != base.Host {
		hw.str("host", h.Host)
	}
	if h.ExpectStatus != base.ExpectStatus {
		hw.str("expect_status", h.ExpectStatus)
	}
	if h.ExpectBody != base.ExpectBody {
		hw.str("expect_body", h.ExpectBody)
	}
	if h.ExpectRegex != base.ExpectRegex {
		hw.str("expect_regex", h.ExpectRegex)
	}
	if h.ExpectDigest != base.ExpectDigest {
		hw.str("expect_digest", h.ExpectDigest)
	}
	if h.TLSSkipVerify != base.TLSSkipVerify {
		hw.value("tls_skip_verify", strconv.FormatBool(h.TLSSkipVerify))
	}
	if h.Send != base.Send {
		hw.str("send", h.Send)
	}
	if h.Expect != base.Expect {
		hw.str("expect", h.Expect)
	}
	if len(h.ExtraURLs) > 0 {
		hw.value("extra_urls", flowURLs(h.ExtraURLs))
	}
	if !slices.Equal(h.Command, base.Command) {
		hw.list("command", h.Command)
	}
	if h.DNSName != base.DNSName {
		hw.str("dns_name", h.DNSName)
	}
	if h.DNSType != base.DNSType {
		hw.str("dns_type", h.DNSType)
	}
	if h.HeloName != base.HeloName {
		hw.str("helo_name", h.HeloName)
	}
	if h.BFDInterval != base.BFDInterval {
		hw.str("bfd_interval", fmtDuration(h.BFDInterval))
	}
	if h.BFDMultiplier != base.BFDMultiplier {
		hw.int("bfd_multiplier", h.BFDMultiplier)
	}
	if h.File != base.File {
		hw.str("file", h.File)
	}
	if h.FileWeight != base.FileWeight {
		hw.int("file_weight", h.FileWeight)
	}
	if h.FileReverse != base.FileReverse {
		hw.value("file_reverse", strconv.FormatBool(h.FileReverse))
	}
	if h.WeightFromExit != base.WeightFromExit {
		hw.value("weight_from_exit", strconv.FormatBool(h.WeightFromExit))
	}
	if h.StartDown != base.StartDown {
		hw.value("start_down", strconv.FormatBool(h.StartDown))
	}
	if len(h.Also) > 0 && !reflect.DeepEqual(h.Also, base.Also) {
		hw.key("also")
		hw.b.WriteString("\n")
		for _, a := range h.Also {
			iw := &writer{b: hw.b, prefix: hw.indent + "  - ", indent: hw.indent + "    "}
			iw.healthKeys(conf.DefaultHealthCheck(), a)
		}
	}
}

// scalar is s as a YAML string: plain where that reads back as the same
// string, else quoted (double quotes, with escapes, for control characters).
func scalar(s string) string {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		n.Style = yaml.DoubleQuotedStyle
	}
	out, err := yaml.Marshal(n)
	if err != nil {
		return strconv.Quote(s)
	}
	return strings.TrimSuffix(string(out), "\n")
}

// flow is a list of strings in YAML's flow style: [a, b].
func flow(v []string) string {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, s := range v {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s})
	}
	out, err := yaml.Marshal(n)
	if err != nil {
		return "[]"
	}
	return strings.TrimSuffix(string(out), "\n")
}

// flowURLs is extra_urls as a YAML flow sequence of flow maps, each with
// the keys it sets.
func flowURLs(urls []conf.HealthURL) string {
	seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, u := range urls {
		m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		for _, kv := range [...][2]string{{"path", u.Path}, {"expect_status", u.ExpectStatus}, {"expect_body", u.ExpectBody},
			{"expect_regex", u.ExpectRegex}, {"expect_digest", u.ExpectDigest}} {
			if kv[1] != "" {
				m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: kv[0]},
					&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: kv[1]})
			}
		}
		seq.Content = append(seq.Content, m)
	}
	out, err := yaml.Marshal(seq)
	if err != nil {
		return "[]"
	}
	return strings.TrimSuffix(string(out), "\n")
}

// fmtDuration writes whole seconds as "6s", else milliseconds ("1500ms").
func fmtDuration(d time.Duration) string {
	switch {
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	case d%time.Millisecond == 0:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
	return d.String()
}
