package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
)

// plot draws two line charts side by side as SVG: received rate against
// offered rate, and one-way p99 latency (log scale) against offered rate,
// one line per case. The offered rate of a "max" step is what was sent.
func plot(cases []*Case) []byte {
	const w, h, pad = 460, 320, 60
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}
	var xmax, ymax, lmin, lmax float64 = 1, 1, math.Inf(1), 1
	for _, c := range cases {
		for _, s := range c.steps {
			xmax = math.Max(xmax, offered(s))
			ymax = math.Max(ymax, s.SrvPPS)
			if s.OneWay.P99 > 0 {
				lmin = math.Min(lmin, s.OneWay.P99)
				lmax = math.Max(lmax, s.OneWay.P99)
			}
		}
	}
	if math.IsInf(lmin, 1) {
		lmin = 0.1
	}
	lo, hi := math.Floor(math.Log10(math.Max(lmin, 0.01))), math.Ceil(math.Log10(lmax*1.01))
	if hi <= lo {
		hi = lo + 1
	}
	xmax, ymax = niceCeil(xmax), niceCeil(ymax)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", 2*w, h+40)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	panel := func(x0 int, title, ylabel string, yTicks []float64, yPos func(float64) float64, yFmt func(float64) string, val func(step) float64) {
		px := func(v float64) float64 { return float64(x0+pad) + v/xmax*float64(w-pad-20) }
		fmt.Fprintf(&b, `<text x="%d" y="16" font-size="13" font-weight="bold">%s</text>`+"\n", x0+pad, html.EscapeString(title))
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", x0+pad, h-pad+20, x0+w-20, h-pad+20)
		fmt.Fprintf(&b, `<line x1="%d" y1="30" x2="%d" y2="%d" stroke="black"/>`+"\n", x0+pad, x0+pad, h-pad+20)
		for i := 0; i <= 4; i++ {
			v := xmax * float64(i) / 4
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(v), h-pad+34, si(v))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">offered (sent) packets/s</text>`+"\n", x0+w/2, h-pad+50)
		for _, v := range yTicks {
			y := yPos(v)
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", x0+pad, y, x0+w-20, y)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x0+pad-4, y+4, yFmt(v))
		}
		fmt.Fprintf(&b, `<text transform="translate(%d,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", x0+14, h/2, html.EscapeString(ylabel))
		for i, c := range cases {
			col := colors[i%len(colors)]
			pts := ""
			for _, s := range c.steps {
				v := val(s)
				if v <= 0 {
					continue
				}
				pts += fmt.Sprintf("%.1f,%.1f ", px(offered(s)), yPos(v))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(offered(s)), yPos(v), col)
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", pts, col)
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", x0+pad+10, 40+14*i, col, html.EscapeString(c.Name))
		}
	}
	plotH := float64(h - pad + 20 - 30)
	var rateTicks []float64
	for i := 0; i <= 4; i++ {
		rateTicks = append(rateTicks, ymax*float64(i)/4)
	}
	panel(0, "received rate (server side)", "packets/s", rateTicks,
		func(v float64) float64 { return float64(h-pad+20) - v/ymax*plotH }, si,
		func(s step) float64 { return s.SrvPPS })
	var latTicks []float64
	for e := lo; e <= hi; e++ {
		latTicks = append(latTicks, math.Pow(10, e))
	}
	panel(w, "one-way latency p99 (log)", "microseconds", latTicks,
		func(v float64) float64 {
			return float64(h-pad+20) - (math.Log10(v)-lo)/(hi-lo)*plotH
		},
		func(v float64) string { return fmt.Sprintf("%g", v) },
		func(s step) float64 { return s.OneWay.P99 })
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func offered(s step) float64 {
	if s.Offered > 0 {
		return s.Offered
	}
	return s.SentPPS
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

func si(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", math.Round(v/1e4)/100)
	case v >= 1e3:
		return fmt.Sprintf("%gk", math.Round(v/10)/100)
	}
	return fmt.Sprintf("%g", v)
}
