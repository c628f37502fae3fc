package main

import (
	"fmt"
	"strings"
)

// The SYN proxy case (METHOD-synproxy, e.g. nat-synproxy): lbgen's "syn"
// pattern, spoofed SYNs each from the next client address:port at every
// offered load, to a service with synproxy: true. lbd answers each SYN
// with a cookie SYN-ACK back to the client side and makes no connection,
// so nothing reaches the servers: the rate received is the client side's
// (the cookies), which cookieRates puts where the summary reads a case's
// received rate. Its vs_loop ratio is then the cookie rate against the
// same run's loop reference, and the cookie rate per lcore is in the
// case's extra numbers (syn_cookies_per_lcore_pps).

// synProxyConfig turns on the SYN proxy for the one service of a case's
// configuration.
func synProxyConfig(cfg string) string {
	return strings.Replace(cfg, "    scheduler: rr\n", "    scheduler: rr\n    synproxy: true\n", 1)
}

// cookieRates makes the client side's received rate (the cookie SYN-ACKs)
// the case's received rate, and records the best per lcore.
func cookieRates(c *Case) {
	best := cookieSteps(c)
	lcores := 1
	if c.Spec != nil && c.Spec.Lcores > 0 {
		lcores = c.Spec.Lcores
	}
	c.Extra["syn_cookies_per_lcore_pps"] = best / float64(lcores)
	c.Extra["received_at"] = "client side: cookie SYN-ACKs (the servers get nothing)"
	fmt.Printf("%s: %.0f SYN cookies/s at best, %.0f per lcore\n", c.Name, best, best/float64(lcores))
}

// cookieSteps makes each step's client side received rate its received
// rate (and its loss against it), and returns the best: cookieRates's,
// and -report-from's on the steps it reads back from lbgen's report.
func cookieSteps(c *Case) (best float64) {
	for i := range c.steps {
		s := &c.steps[i]
		s.SrvPPS = s.CliPPS
		if s.SentPPS > 0 {
			s.Loss = max(0, 1-s.CliPPS/s.SentPPS)
		}
		best = max(best, s.CliPPS)
	}
	return best
}
