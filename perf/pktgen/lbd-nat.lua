-- lbd-nat.lua: Pktgen-DPDK (23.06) script driving a dplb lbd VS/NAT service.
--
-- Port 0 (client side) sends TCP from a range of client addresses and ports
-- to the VIP; lbd DNATs it to the real servers behind its server port,
-- which is cabled to Pktgen's port 1. Port 1 only counts (Pktgen does not
-- answer like a server: for both directions through lbd use lbgen, see
-- README.md). Edit the settings block to match lbd's configuration.
--
--   pktgen -l 0-2 -n 4 -a 0000:03:00.0 -a 0000:03:00.1 -- -P -T -m "[1].0,[2].1" -f perf/pktgen/lbd-nat.lua

package.path = package.path .. ";?.lua;perf/pktgen/?.lua"
require "Pktgen"

local S = {
	client_port = 0,
	server_port = 1,
	lb_mac      = "00:00:00:00:00:00", -- lbd client port's MAC (lbctl / lbd log "port up")
	vip         = "203.0.113.10",
	vport       = 80,
	client_ip   = "203.0.113.100",     -- first client address (on lbd's client subnet)
	client_ips  = 16,                  -- how many client addresses
	sport_min   = 1024,
	sport_max   = 65535,
	pkt_size    = 64,                  -- on the wire, with FCS
	rate        = 10,                  -- percent of line rate
	seconds     = 10,
}

local function ip_add(ip, n)
	local a, b, c, d = ip:match("(%d+)%.(%d+)%.(%d+)%.(%d+)")
	local v = ((tonumber(a) * 256 + tonumber(b)) * 256 + tonumber(c)) * 256 + tonumber(d) + n
	return string.format("%d.%d.%d.%d", v >> 24 & 255, v >> 16 & 255, v >> 8 & 255, v & 255)
end

local p = tostring(S.client_port)
pktgen.stop(p)
pktgen.clr()
-- Range mode: every packet steps the source address and port.
pktgen.range.dst_mac(p, "start", S.lb_mac)
pktgen.range.src_ip(p, "start", S.client_ip)
pktgen.range.src_ip(p, "inc", "0.0.0.1")
pktgen.range.src_ip(p, "min", S.client_ip)
pktgen.range.src_ip(p, "max", ip_add(S.client_ip, S.client_ips - 1))
pktgen.range.dst_ip(p, "start", S.vip)
pktgen.range.dst_ip(p, "inc", "0.0.0.0")
pktgen.range.dst_ip(p, "min", S.vip)
pktgen.range.dst_ip(p, "max", S.vip)
pktgen.range.src_port(p, "start", S.sport_min)
pktgen.range.src_port(p, "inc", 1)
pktgen.range.src_port(p, "min", S.sport_min)
pktgen.range.src_port(p, "max", S.sport_max)
pktgen.range.dst_port(p, "start", S.vport)
pktgen.range.dst_port(p, "inc", 0)
pktgen.range.dst_port(p, "min", S.vport)
pktgen.range.dst_port(p, "max", S.vport)
pktgen.range.ip_proto(p, "tcp")
pktgen.range.pkt_size(p, "start", S.pkt_size)
pktgen.range.pkt_size(p, "inc", 0)
pktgen.range.pkt_size(p, "min", S.pkt_size)
pktgen.range.pkt_size(p, "max", S.pkt_size)
-- lbd opens a VS/NAT connection only on a SYN (as IPVS): a SYN pass over
-- the 5-tuples first, then ACK segments. Where this Pktgen's Lua API has no
-- range TCP flags, set sloppy_tcp: true on lbd's service instead (it then
-- opens connections on any TCP segment).
local flags = pktgen.range.tcp_flags
if flags == nil then
	printf("lbd-nat: no pktgen.range.tcp_flags: configure the service with sloppy_tcp: true\n")
	flags = function() end
end
flags(p, "syn")
pktgen.set_range(p, "on")
pktgen.set(p, "rate", S.rate)

pktgen.start(p)
pktgen.delay(2000)
pktgen.stop(p)
flags(p, "ack")
pktgen.clr()
pktgen.start(p)
pktgen.delay(S.seconds * 1000)
pktgen.stop(p)
pktgen.delay(500)

local st = pktgen.portStats("all", "port")
local tx = st[S.client_port].opackets
local rx = st[S.server_port].ipackets
printf("lbd-nat: rate %d%%, sent %d, received at the server side %d, loss %.4f%%\n",
	S.rate, tx, rx, tx > 0 and 100 * (tx - rx) / tx or 0)
