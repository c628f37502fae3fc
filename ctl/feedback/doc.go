// Package feedback adjusts real servers' weights from the load they
// report: LVS's dynamic feedback load balancing. Health checks say whether
// a server may be scheduled at all; feedback says how much work an up
// server should get.
//
// # What the servers report
//
// One number: the server's load in percent, 0 (idle) to 100 (saturated),
// as the body of a 2xx answer to GET http://server:port/path (type http;
// port 0 = the real server's port), or as the standard output of a
// command that exits 0 (type exec; the environment carries DPLB_RS_ADDR,
// DPLB_RS_PORT, DPLB_VIP and DPLB_VPORT). White space around it and a
// trailing "%" are allowed; anything else, a number out of 0..100, an
// error status, a failed command or a timeout is a failed poll, which
// keeps the last weight. How a server computes its load (CPU, run queue,
// connections, its own queue depth) is its business; it should reach 100
// where it cannot take more.
//
// # From load to weight
//
// LVS's dynamic feedback (Zhang, "Linux Virtual Server for Scalable
// Network Services") computes an aggregate load per server from several
// inputs and nudges each weight up or down by a cube-root step, changing
// the weights only when they moved by more than a threshold. With a
// single load figure that becomes, per poll (see Next):
//
//	smoothed = smoothing*previous + (1-smoothing)*load
//	wanted   = 1 - smoothed/100, within [min, max]_weight_percent/100
//	applied  = wanted, if it differs from the applied share by more than
//	           hysteresis_percent/100 or is a bound; else unchanged
//	weight   = round(configured weight * applied)    (at least 1 if min > 0)
//
// so a server at 30% load gets 70% of its configured weight, one at 95%
// its floor. The first answer is taken as is, a smoothed load within half
// a point of the polled one takes its value (an idle server does get its
// whole weight back), and before the first answer a server has its
// configured weight. A configured weight of 0 stays 0. Only the applied
// share is kept, not a weight: the controller passes the current
// configured weight (which lbctl -e may have changed) to Weight.
//
// The weight is an integer, so feedback needs configured weights with room
// to move: with weight 1 every share rounds to 1; with 100 the steps are
// percent.
//
// # Example
//
//	services:
//	  - protocol: tcp
//	    vip: 203.0.113.10
//	    port: 80
//	    scheduler: wlc
//	    servers:
//	      - {address: 198.51.100.11, weight: 100}
//	      - {address: 198.51.100.12, weight: 100}
//	    health: {type: http, path: /healthz}
//	    feedback:
//	      type: http
//	      port: 9100              # GET http://198.51.100.11:9100/load -> "37.5"
//	      path: /load
//	      interval: 5s
//	      timeout: 1s
//	      min_weight_percent: 10  # never below weight 10
//	      max_weight_percent: 100
//	      smoothing: 0.5
//	      hysteresis_percent: 10  # move only by more than 10 weight points
//
// or, with a command run on the LB host:
//
//	feedback:
//	  type: exec
//	  command: [/usr/local/bin/rs-load]   # prints e.g. 42 for $DPLB_RS_ADDR
//
// # Use
//
// The controller owns a Poller: New(log, onChange), Update(Targets(services))
// at start and on every reload, Run(ctx) in a goroutine, Close at shutdown.
// When it builds a snapshot it asks Weight(key, configured) for every
// server of a service with feedback; onChange (called when an applied
// share changes) tells it to build one again. Polls leave from the host's
// own stack, optionally bound to the source address, like health checks.
package feedback
