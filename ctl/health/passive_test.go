package health_test

import (
	"testing"

	"github.com/dplb/dplb/ctl/health"
)

func TestJudge(t *testing.T) {
	def := health.DefaultPassiveThresholds()
	tests := []struct {
		th               health.PassiveThresholds
		newConns, estabs uint64
		want             health.Window
	}{
		{def, 0, 0, health.WindowQuiet},
		{def, 9, 0, health.WindowQuiet},
		{def, 10, 0, health.WindowBad},
		{def, 10, 4, health.WindowBad},
		{def, 10, 5, health.WindowGood}, // exactly half unanswered is not more than half
		{def, 10, 10, health.WindowGood},
		{def, 10, 25, health.WindowGood}, // established from the previous window
		{health.PassiveThresholds{}, 10, 4, health.WindowBad},
		{health.PassiveThresholds{MinAttempts: 100, MaxUnanswered: 0.1}, 99, 0, health.WindowQuiet},
		{health.PassiveThresholds{MinAttempts: 100, MaxUnanswered: 0.1}, 100, 89, health.WindowBad},
		{health.PassiveThresholds{MinAttempts: 100, MaxUnanswered: 0.1}, 100, 90, health.WindowGood},
		{health.PassiveThresholds{MinAttempts: 1, MaxUnanswered: 2}, 10, 4, health.WindowBad}, // out-of-range ratio: default 0.5
	}
	for _, tt := range tests {
		if got := tt.th.Judge(tt.newConns, tt.estabs); got != tt.want {
			t.Errorf("%+v.Judge(%d, %d) = %v, want %v", tt.th, tt.newConns, tt.estabs, got, tt.want)
		}
	}
}

func TestPassive(t *testing.T) {
	type obs struct {
		newConns, estabs uint64
		want             health.Suspicion
	}
	var (
		quietOK   = health.Suspicion{}
		stillOK   = health.Suspicion{}
		suspect   = health.Suspicion{Suspect: true}
		becomes   = func(r string) health.Suspicion { return health.Suspicion{Suspect: true, Changed: true, Reason: r} }
		clears    = health.Suspicion{Changed: true}
		quietSusp = health.Suspicion{Suspect: true}
	)
	tests := []struct {
		name string
		seq  []obs
	}{
		{"healthy", []obs{{100, 100, stillOK}, {50, 49, stillOK}, {0, 0, quietOK}}},
		{"one bad window is not enough", []obs{{20, 0, stillOK}, {20, 20, stillOK}, {20, 0, stillOK}}},
		{"two bad windows", []obs{{20, 2, stillOK}, {30, 3, becomes("27 of 30 new connections never reached ESTABLISHED")}, {20, 0, suspect}}},
		{"quiet windows neither break nor extend a streak", []obs{{20, 0, stillOK}, {3, 0, quietOK}, {20, 0, becomes("20 of 20 new connections never reached ESTABLISHED")}}},
		{"cleared after two good windows", []obs{{20, 0, stillOK}, {20, 0, becomes("20 of 20 new connections never reached ESTABLISHED")},
			{0, 0, quietSusp}, {20, 20, suspect}, {20, 0, suspect}, {20, 20, suspect}, {20, 19, clears}, {20, 20, stillOK}}},
	}
	for _, tt := range tests {
		p := health.NewPassive(health.PassiveThresholds{})
		k := health.Key{Service: "tcp/192.0.2.100:80", Addr: vip}
		other := health.Key{Service: "tcp/192.0.2.100:80"}
		for i, o := range tt.seq {
			if got := p.Observe(k, o.newConns, o.estabs); got != o.want {
				t.Errorf("%s: window %d: Observe(%d, %d) = %+v, want %+v", tt.name, i, o.newConns, o.estabs, got, o.want)
			}
			if got := p.Suspect(k); got != o.want.Suspect {
				t.Errorf("%s: window %d: Suspect() = %v", tt.name, i, got)
			}
			if p.Suspect(other) {
				t.Errorf("%s: another server is suspect", tt.name)
			}
		}
		p.Reset(k)
		if p.Suspect(k) {
			t.Errorf("%s: suspect after Reset", tt.name)
		}
	}
}
