package web

import (
	"slices"
	"time"
)

// A window the console keeps in memory: points every step, capacity
// points in all. Coarser windows hold averages of the 1-second samples.
type window struct {
	Name  string
	step  time.Duration
	count int
}

// windows are the chart ranges the page offers.
var windows = []window{
	{"10m", time.Second, 600},
	{"1h", 10 * time.Second, 360},
	{"24h", time.Minute, 1440},
}

// row is one point of every metric of an entity.
type row struct {
	t    int64 // Unix seconds, the start of the step
	vals []float64
}

// ring holds the last points of one window, and the sum of the samples of
// the step being filled.
type ring struct {
	rows   []row
	next   int // where the next row goes once rows is full
	bucket int64
	sum    []float64
	n      int
}

func (r *ring) push(cap int, rw row) {
	if len(r.rows) < cap {
		r.rows = append(r.rows, rw)
		return
	}
	r.rows[r.next] = rw
	r.next = (r.next + 1) % cap
}

// add averages a sample into the window's current step and closes the step
// when t enters the next one.
func (r *ring) add(w window, t time.Time, vals []float64) {
	b := t.Unix() / int64(w.step/time.Second)
	if r.n > 0 && b != r.bucket {
		avg := make([]float64, len(r.sum))
		for i, s := range r.sum {
			avg[i] = s / float64(r.n)
		}
		r.push(w.count, row{t: r.bucket * int64(w.step/time.Second), vals: avg})
		r.n = 0
	}
	if r.n == 0 {
		r.bucket = b
		r.sum = make([]float64, len(vals))
	}
	for len(r.sum) < len(vals) { // a metric was added (grow)
		r.sum = append(r.sum, 0)
	}
	for i, v := range vals {
		r.sum[i] += v
	}
	r.n++
}

// ordered returns the rows oldest first.
func (r *ring) ordered() []row {
	out := make([]row, 0, len(r.rows))
	out = append(out, r.rows[r.next:]...)
	return append(out, r.rows[:r.next]...)
}

// entity is the time series of one thing the charts show: the whole load
// balancer, a service, a real server, the lcores.
type entity struct {
	metrics []string
	rings   []ring // one per window
	seen    int64  // the sample round that last updated it
}

func newEntity(metrics []string) *entity {
	return &entity{metrics: metrics, rings: make([]ring, len(windows))}
}

// grow adds metric to e unless it has it; the points before hold 0 for it.
func (e *entity) grow(metric string) {
	if !slices.Contains(e.metrics, metric) {
		e.metrics = append(e.metrics, metric)
	}
}

func (e *entity) add(t time.Time, vals []float64) {
	for i, w := range windows {
		if w.step == time.Second {
			e.rings[i].push(w.count, row{t: t.Unix(), vals: vals})
			continue
		}
		e.rings[i].add(w, t, vals)
	}
}

// Series is a window of an entity's series, as the charts want it: one
// time axis and one array per metric.
type Series struct {
	Entity  string               `json:"entity"`
	Window  string               `json:"window"`
	Times   []int64              `json:"t"`
	Metrics map[string][]float64 `json:"series"`
}

func (e *entity) series(name string, wi int) Series {
	s := Series{Entity: name, Window: windows[wi].Name, Times: []int64{}, Metrics: map[string][]float64{}}
	rows := e.rings[wi].ordered()
	for _, m := range e.metrics {
		s.Metrics[m] = make([]float64, 0, len(rows))
	}
	for _, r := range rows {
		s.Times = append(s.Times, r.t)
		for i, m := range e.metrics {
			var v float64
			if i < len(r.vals) { // else the metric came later (grow)
				v = r.vals[i]
			}
			s.Metrics[m] = append(s.Metrics[m], v)
		}
	}
	return s
}
