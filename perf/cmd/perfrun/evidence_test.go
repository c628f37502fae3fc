package main

import (
	"encoding/json"
	"testing"
)

// TestEvidence: a step's evidence is the difference of two lbctl
// samples: GC cycles and pause time, the top non-empty bucket of the
// step's loop iterations (the lifetime maximum for the open last one),
// the OS's waits, stage cycles per packet, and the jobs' slow runs.
func TestEvidence(t *testing.T) {
	before := `{"lcores":[{"rx_packets":1000,"run_queue_wait_seconds":0.5,"preemptions":10,"loop_max_us":90000,
		"loop_iterations":[5,0,0,1],"stage_cycles":{"rx":1000,"parse":2000,"lookup":0,"process":5000,"tx":1000},
		"jobs":[{"name":"expire","slow_runs":4},{"name":"publish","slow_runs":1}]}],
		"runtime":{"gc_cycles":3,"gc_pause_seconds":0.001,"gc_pauses":[0,0,4,0],"bucket_bounds_ns":[512,1024,2048,0]}}`
	after := `{"lcores":[{"rx_packets":3000,"run_queue_wait_seconds":0.75,"preemptions":15,"loop_max_us":90000,
		"loop_iterations":[105,7,2,1],"stage_cycles":{"rx":3000,"parse":4000,"lookup":1000,"process":15000,"tx":3000},
		"jobs":[{"name":"expire","slow_runs":7},{"name":"publish","slow_runs":1},{"name":"commands","slow_runs":2}]}],
		"runtime":{"gc_cycles":5,"gc_pause_seconds":0.0015,"gc_pauses":[0,1,6,0],"bucket_bounds_ns":[512,1024,2048,0]}}`
	var a, b lbctlJSON
	if err := json.Unmarshal([]byte(before), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(after), &b); err != nil {
		t.Fatal(err)
	}
	var m StepMetrics
	m.evidence(&a, &b)
	if m.GCCycles != 2 || m.GCPauseMs != 0.5 || m.GCPauseMaxUs != 2.048 {
		t.Fatalf("gc: %d cycles, %g ms, longest %g µs", m.GCCycles, m.GCPauseMs, m.GCPauseMaxUs)
	}
	if m.LoopMaxUs != 2.048 || m.LoopIterations[0] != 100 || m.LoopIterations[3] != 0 {
		t.Fatalf("loop: longest %g µs, %v", m.LoopMaxUs, m.LoopIterations)
	}
	if m.RunQueueWaitMs != 250 || m.Preemptions != 5 {
		t.Fatalf("sched: %g ms, %d", m.RunQueueWaitMs, m.Preemptions)
	}
	if m.StageCPP["process"] != 5 || m.StageCPP["lookup"] != 0.5 || m.ownCycles() != 6.5 {
		t.Fatalf("stages %v own %g", m.StageCPP, m.ownCycles())
	}
	if len(m.SlowJobs) != 2 || m.SlowJobs["expire"] != 3 || m.SlowJobs["commands"] != 2 || slowJobsText(m.SlowJobs) != "commands 2, expire 3" {
		t.Fatalf("slow jobs %v (%q)", m.SlowJobs, slowJobsText(m.SlowJobs))
	}
	if slowJobsText(nil) != "0" {
		t.Fatal("no slow job is not 0")
	}
	// An iteration in the open last bucket: the lifetime longest.
	b.Lcores[0].LoopIterations[3] = 2
	m = StepMetrics{}
	m.evidence(&a, &b)
	if m.LoopMaxUs != 90000 {
		t.Fatalf("open bucket: %g µs", m.LoopMaxUs)
	}
}
