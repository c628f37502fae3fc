-- lbd-nat.lua: Pktgen-DPDK (23.06) script driving a dplb lbd VS/NAT service.
--
-- Port 0 (client side) first replays a pcap of one SYN per flow (written by
-- `lbgen -syn-pcap`, loaded with Pktgen's `-s 0:FILE`), so that lbd opens
-- every connection as IPVS would, on a SYN; then it sends ACK segments in
-- range mode over the same flows to the VIP (the pcap holds every address x
-- port pair: which of them range mode's two stepping counters send depends
-- on where each starts). lbd DNATs them to the real
-- server behind its server port, which is cabled to Pktgen's port 1: port 1
-- holds the real server's address and answers lbd's ARP for it, and counts.
-- It does not answer like a server: for both directions through lbd use
-- lbgen (see README.md). Edit the settings block to match lbd's
-- configuration and the lbgen command line that wrote the pcap.
--
-- Needs nothing but a stock Pktgen: no require of Pktgen.lua, which only
-- resolves inside Pktgen's own tree.
--
--   lbgen -syn-pcap /tmp/syn.pcap -dst-mac LBD_CLIENT_PORT_MAC -vip 203.0.113.10:80 \
--         -clients 203.0.113.100-203.0.113.115 -client-ports 1024-5119
--   pktgen -l 0-2 -n 4 -a 0000:03:00.0 -a 0000:03:00.1 -- -P -T -m "[1].0,[2].1" \
--          -s 0:/tmp/syn.pcap -f perf/pktgen/lbd-nat.lua

local function printf(...) io.write(string.format(...)); io.flush() end

local S = {
	client_port = 0,
	server_port = 1,
	lb_mac      = "00:00:00:00:00:00", -- lbd client port's MAC (lbd log "port up"); the pcap's -dst-mac
	vip         = "203.0.113.10",
	vport       = 80,
	client_ip   = "203.0.113.100",     -- first client address (lbgen -clients first-last)
	client_ips  = 16,                  -- how many client addresses
	sport_min   = 1024,                -- lbgen -client-ports first-last
	sport_max   = 5119,               -- 16 x 4096 = 65536 flows
	server_ip   = "198.51.100.11/24",  -- port 1: the real server lbd forwards to (answers ARP)
	pkt_size    = 64,                  -- on the wire, with FCS (lbgen -size 60, the default)
	syn_rate    = 1,                   -- percent of line rate while replaying the SYNs
	syn_seconds = 2,                   -- long enough to send every SYN once at syn_rate
	rate        = 10,                  -- percent of line rate
	seconds     = 10,
}

local function ip_add(ip, n)
	local a, b, c, d = ip:match("(%d+)%.(%d+)%.(%d+)%.(%d+)")
	local v = ((tonumber(a) * 256 + tonumber(b)) * 256 + tonumber(c)) * 256 + tonumber(d) + n
	return string.format("%d.%d.%d.%d", v >> 24 & 255, v >> 16 & 255, v >> 8 & 255, v & 255)
end

local p, s = tostring(S.client_port), tostring(S.server_port)
local flows = S.client_ips * (S.sport_max - S.sport_min + 1)

pktgen.stop("all")
-- The real server's side: its address, and ARP answers for it.
pktgen.set_ipaddr(s, "src", S.server_ip)
pktgen.process(s, "on")

-- Range mode: every packet steps the source address and port together,
-- over the ranges lbgen -syn-pcap was given. Its TCP flags are
-- Pktgen's default, ACK.
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

-- The SYN pass: replay the pcap (it loops) for syn_seconds.
pktgen.clr()
pktgen.pcap(p, "on")
pktgen.set(p, "rate", S.syn_rate)
pktgen.start(p)
pktgen.delay(S.syn_seconds * 1000)
pktgen.stop(p)
pktgen.delay(500)
local syns = pktgen.portStats("all", "port")[S.client_port].opackets
printf("lbd-nat: SYN pass: %d flows, %d SYNs sent\n", flows, syns)
if syns == 0 then
	printf("lbd-nat: no SYN sent: start pktgen with -s %s:FILE, FILE written by lbgen -syn-pcap\n", p)
elseif syns < flows then
	printf("lbd-nat: fewer SYNs than flows: raise syn_rate or syn_seconds\n")
end
pktgen.pcap(p, "off")

-- The measured pass: ACK segments over the same flows.
pktgen.set_range(p, "on")
pktgen.set(p, "rate", S.rate)
pktgen.clr()
pktgen.delay(200)
pktgen.start(p)
pktgen.delay(S.seconds * 1000)
pktgen.stop(p)
pktgen.delay(500)

local st = pktgen.portStats("all", "port")
local tx = st[S.client_port].opackets
local rx = st[S.server_port].ipackets
printf("lbd-nat: rate %g%%, sent %d, received at the server side %d, loss %.4f%%\n",
	S.rate, tx, rx, tx > 0 and 100 * (tx - rx) / tx or 0)
