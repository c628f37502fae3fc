#!/bin/sh
# dplb-notify.sh: keepalived's notify hook for an active/backup pair of lbd
# directors. keepalived elects the master over VRRP on the management link;
# this script makes the local lbd follow:
#   master        lbd answers ARP for the VIPs and the ports' floating
#                 addresses (and announces them by gratuitous ARP), and its
#                 master sync daemon sends connection state to the peer;
#   backup, fault lbd answers ARP for neither and its backup sync daemon
#   and stop      installs what the master sends, so that it can take over.
# The VIPs live in lbd's DPDK dataplane, not in the kernel: keepalived's
# virtual_ipaddress holds only a management address.
#
# keepalived.conf: vrrp_scripts running "dplb-notify.sh check" (lbd
# answers on its socket and every dataplane port's link is up) and
# "dplb-notify.sh alive" (something listens on it) tracked by the
# vrrp_instance, and in it:
#   notify_master "/etc/keepalived/dplb-notify.sh master"
#   notify_backup "/etc/keepalived/dplb-notify.sh backup"
#   notify_fault  "/etc/keepalived/dplb-notify.sh fault"
#   notify_stop   "/etc/keepalived/dplb-notify.sh stop"
#
# Edit the settings below for this director.
set -u

LBCTL=/usr/bin/lbctl      # lbctl (where the Debian package installs it)
SOCKET=/run/dplb/lbd.sock # lbd's control socket (control.socket in lbd.yaml)
SYNC_IF=eth1              # the management interface that carries sync ("": lbd.yaml's sync: section)
SYNC_ID=1                 # the pair's sync id, the same on both directors
LOG=                      # a file to log to; empty: syslog (logger -t dplb-notify)

log() {
	if [ -n "$LOG" ]; then
		printf '%s %s\n' "$(date -u +%H:%M:%S.%N)" "$*" >>"$LOG"
	else
		logger -t dplb-notify -- "$*" 2>/dev/null || true
	fi
}

lbctl() {
	out=$("$LBCTL" --socket "$SOCKET" "$@" 2>&1)
	rc=$?
	log "lbctl $* -> $rc${out:+: $out}"
	return $rc
}

case ${1:-} in
check)
	# keepalived's vrrp_script, every second: does lbd answer, with
	# every dataplane port's link up? (A DPDK port is no kernel
	# interface: track_interface cannot see it.)
	exec "$LBCTL" --socket "$SOCKET" --ha-check >/dev/null 2>&1
	;;
alive)
	# keepalived's other vrrp_script, every second: is lbd there at all?
	# Only a socket nobody listens on fails it; a slow answer is check's.
	out=$(timeout 1 "$LBCTL" --socket "$SOCKET" --ha-state 2>&1)
	case $out in
	*"does not seem to be running"*) exit 1 ;;
	esac
	exit 0
	;;
master) role=master other=backup ;;
backup | fault | stop) role=backup other=master ;;
*)
	echo "usage: $0 master|backup|fault|stop|check|alive" >&2
	exit 2
	;;
esac

# keepalived forks one script per transition: two quick transitions must
# not interleave (the lock lives beside lbd's socket).
exec 9>>"$SOCKET.notify.lock"
flock 9

log "keepalived: $1"
status=0
# The ARP answers first: they decide which director gets the packets.
lbctl --ha-state "$role" || status=1
# Then sync: the master sends, the backup receives. A daemon that is not
# running cannot be stopped, which is fine.
if "$LBCTL" --socket "$SOCKET" -L --daemon 2>/dev/null | grep -q "^$other sync daemon"; then
	lbctl --stop-daemon "$other" || status=1
fi
if ! "$LBCTL" --socket "$SOCKET" -L --daemon 2>/dev/null | grep -q "^$role sync daemon"; then
	if [ -n "$SYNC_IF" ]; then
		lbctl --start-daemon "$role" --mcast-interface "$SYNC_IF" --syncid "$SYNC_ID" || status=1
	else
		lbctl --start-daemon "$role" --syncid "$SYNC_ID" || status=1
	fi
fi
exit $status
