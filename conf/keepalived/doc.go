// Package keepalived turns the LVS part of a keepalived.conf (its
// virtual_server blocks) into lbd's services, for lbd import-keepalived.
// It reads keepalived's grammar (ParseFile: blocks, comments, quotes,
// includes), converts (Convert) and writes the services section of an
// lbd.yaml, and its snat section for DPVS's SNAT (Result.YAML). Every keyword it cannot carry over as keepalived
// meant it is named in a Warning; vrrp_* and the other blocks that are
// not LVS are left alone without one, and so is global_defs but for its
// LVS keywords (lvs_timeouts and lvs_sync_daemon are named with lbd's
// settings for them, which the services section does not hold).
//
// What maps to what, keepalived's defaults applied first:
//
//   - virtual_server VIP PORT: a service (IPv4 or IPv6); virtual_server
//     group NAME one for each address and port of the virtual_server_group
//     (IP PORT, a range A.B.C.D-E PORT, IPv6's on the last group in hex),
//     each with the whole body, its YAML comment naming the entry;
//     protocol TCP/UDP (default TCP); lb_algo/lvs_sched the scheduler
//     (keepalived's default wlc); sh-port, sh-fallback, mh-port,
//     mh-fallback, flag-1 (fallback) and flag-2 (port) the sched_flags of
//     an sh or mh service; persistence_timeout the persistence (bare:
//     360s, also what persistence_granularity alone implies);
//     persistence_granularity the netmask (IPv4) or persistence_prefix
//     (IPv6); sorry_server IP [PORT] the sorry_server, reached by nat;
//     quorum and hysteresis theirs (a hysteresis not below the quorum
//     lowered to quorum-1).
//   - lb_kind/lvs_method NAT, DR, TUN, FNAT (DPVS's and LVS FullNAT's):
//     every server's forward (nat, dr, tun, fullnat), a real_server's own
//     lvs_method first; dr and tun servers keep the service's port (as
//     keepalived resets it), their check the port written. An IPv6
//     service's IPv4 fullnat servers are NAT64, as in DPVS.
//   - DPVS's groups, read wherever they are in the file: laddr_group_name
//     names a local_address_group (IP [interface], or a range; the
//     interface, DPVS's dpdk0, is dropped: lbd puts a local address on the
//     server-facing port whose subnet holds it), the local_addresses of a
//     service with fullnat servers. lbd's pools never overlap, so a group
//     several services use is split among them in order (with a warning).
//     daddr_group_name (deny_address_group) is the blocklist,
//     waddr_group_name (allow_address_group) the allowlist, their
//     addresses in the VIP's family. syn_proxy is synproxy (tcp, nat and
//     fullnat servers), proxy_protocol v2 proxy_protocol (to fullnat
//     servers), TCP_CHECK's nb_sock_retry (LVS FullNAT's) retry, ops
//     one_packet (udp, dr and tun servers), quic quic (udp, without
//     persistence: DPVS's encoding of the server in QUIC connection IDs
//     is lbd's). A virtual_server on port 0
//     (or on an address alone) is a port-zero service when persistent;
//     its servers' ports are dropped (the client's is kept). A tcp
//     service with fullnat servers and no proxy_protocol gets toa, as
//     DPVS puts its TCP option address in every FullNAT handshake.
//   - DPVS's SNAT match services (virtual_server match NAME, lb_kind
//     SNAT): lbd's snat rules (Result.SNAT, snat.go). src-range is the
//     source, the smallest prefix holding it (a warning when it holds
//     more); the real servers are the addresses; protocol TCP, UDP or
//     ICMP, the match services of one source and addresses one rule.
//     dst-range, iif and oif are dropped: a rule leaves from the port
//     whose subnet holds its addresses.
//   - real_server IP [PORT]: weight (the virtual_server's weight, else 1),
//     uthreshold and lthreshold the thresholds. inhibit_on_failure (weight
//     0 instead of removal) needs no word: lbd takes a failed server out of
//     scheduling and keeps its connections either way (on_failure: keep).
//   - A server's first check is its health, the others its also checks
//     (keepalived wants every checker up; lbd probes them one after the
//     other at the first's interval, their timeouts made to fit it):
//     TCP_CHECK tcp, HTTP_GET http, SSL_GET https
//     (the first url's path, status_code (default 200-299), regex and
//     digest, every other url one of extra_urls with its own; virtualhost
//     the host), UDP_CHECK udp (payload and
//     require_reply in hex: send and expect), PING_CHECK icmp, DNS_CHECK dns (name and type: dns_name, dns_type), SMTP_CHECK
//     smtp (helo_name; the first host block's settings), MISC_CHECK
//     exec (misc_path split into argv as keepalived does; misc_dynamic is
//     weight_from_exit), FILE_CHECK file (the track_file it names:
//     file, its weight or the FILE_CHECK's, reverse as file_reverse;
//     polled every second, rise 1 and fall 1: keepalived watches the file
//     and acts at once, and a FILE_CHECK inherits no other setting; a
//     track_file block may come after the FILE_CHECK), BFD_CHECK bfd (lbd's
//     own single-hop session with the server, timed as the bfd_instance
//     it names, whose neighbor_ip must be the server's address, else the
//     server is left unchecked: the larger of min_rx and min_tx (default
//     10ms) is bfd_interval, within lbd's 10ms..10s, multiplier (default
//     5) bfd_multiplier, source_ip the source (IPv4); polled every 200ms,
//     rise 1 and fall 1, as keepalived acts on the session's state at once
//     and a BFD_CHECK inherits no setting but alpha; passive, ttl or
//     hoplimit but 255, max_hops but 0 and idle_tx but 1000 are dropped:
//     lbd's session is active and single-hop, and sends once a second
//     until it is up; a server's BFD_CHECK is its first check only without
//     another, else an also check, its state read at the other's
//     interval; a bfd_instance may come after the BFD_CHECK). delay_loop is
//     the interval (default 60s), connect_timeout (misc_timeout) the
//     timeout (default 5s; less than the interval, as lbd wants), and
//     keepalived's retry N (default 1, MISC_CHECK 0) is fall N+1: it counts
//     the probes after the first failure, which come delay_before_retry
//     apart (default 1s): the retry_interval. alpha is start_down. One success brings a keepalived
//     server back: rise 1. These settings are inherited from the
//     virtual_server through the real_server to the check, as in keepalived.
//     connect_port is the port, bindto the source (IPv4), connect_ip the
//     VIP target: vip for dr and tun servers.
//   - When every server of a service has the same check it becomes the
//     service's health, else each server's own.
//
// The output loads as it is once the ports are added: what lbd would
// refuse is dropped or changed with a warning. A service with fullnat
// servers and no local address (no laddr_group_name, an unknown group, or
// none left to it) is skipped, not written for the operator to complete.
//
// Dropped with a warning: fwmark virtual servers and group entries, SCTP,
// track_file's init_file (lbd writes no file), a regex Go's RE2 does not take (a url's becomes
// expect_body when it is a plain string, else expect_regex), notify and quorum
// scripts, mail alerts, ops off udp or with nat servers, persistence
// engines, GUE and GRE tunnels. A
// UDP_CHECK without payload is dropped too (lbd sends what it is told),
// and one without require_reply warned about: keepalived's passes on
// silence, lbd's wants a reply. So are DPVS's and LVS FullNAT's keywords
// lbd has no use for: zone blocks (per-zone local addresses), tunnel_group,
// vip_bind_dev, establish_timeout, bps, limit_proportion, hash_target,
// nat_mask, src-range, dst-range, iif and oif outside a match service,
// expire_quiescent_conn, ipset entries; DPVS's dpdk_interface and
// the rest of its vrrp_instance are keepalived's, left alone.
package keepalived
