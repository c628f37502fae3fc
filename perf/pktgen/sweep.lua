-- sweep.lua: rate sweep and zero-loss search through lbd with Pktgen-DPDK.
--
-- Run lbd-nat.lua first (its SYN pass opens the flows, then it leaves port 0
-- in range mode with ACK segments), e.g. with -f, then this with `script
-- perf/pktgen/sweep.lua` at the Pktgen prompt, or chain both with two -f.
-- Needs nothing but a stock Pktgen (no require of Pktgen.lua).
-- Prints one line per rate and a binary search for the highest rate (percent
-- of line rate) with loss <= max_loss.

local function printf(...) io.write(string.format(...)); io.flush() end

local S = {
	client_port = 0,
	server_port = 1,
	seconds     = 5,     -- per trial
	rates       = {1, 2, 5, 10, 20, 40, 60, 80, 100},
	max_loss    = 0.0,   -- fraction; 0 = zero-loss rate (RFC 2544 style)
	precision   = 0.5,   -- stop the search when the bracket is this narrow (percent)
}

local function trial(rate)
	local c, s = tostring(S.client_port), tostring(S.server_port)
	pktgen.set(c, "rate", rate)
	pktgen.clr()
	pktgen.delay(200)
	pktgen.start(c)
	pktgen.delay(S.seconds * 1000)
	pktgen.stop(c)
	pktgen.delay(500) -- packets in flight
	local st = pktgen.portStats("all", "port")
	local tx, rx = st[S.client_port].opackets, st[S.server_port].ipackets
	local loss = tx > 0 and (tx - rx) / tx or 1
	printf("sweep: rate %6.2f%%  tx %12d  rx %12d  tx_pps %10.0f  rx_pps %10.0f  loss %.5f%%\n",
		rate, tx, rx, tx / S.seconds, rx / S.seconds, 100 * loss)
	return loss
end

printf("sweep: %d s per rate\n", S.seconds)
for _, r in ipairs(S.rates) do
	trial(r)
end

local lo, hi = 0, 100
while hi - lo > S.precision do
	local mid = (lo + hi) / 2
	if trial(mid) <= S.max_loss then lo = mid else hi = mid end
end
printf("sweep: highest rate with loss <= %.4f%%: %.2f%% of line rate\n", 100 * S.max_loss, lo)
