package runtime

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/dplb/dplb/dpdk/eal"
	"github.com/dplb/dplb/dpdk/ring"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
)

// confineControlThreads moves every thread of the process (the Go
// runtime's, the control plane's, DPDK's interrupt thread) off the workers'
// CPUs, so none preempts a poll loop; threads made later inherit the mask.
// With no CPU left over (workers on every CPU) nothing changes.
func confineControlThreads(workers []int) (unix.CPUSet, error) {
	var all, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return set, err
	}
	set = all
	for _, cpu := range workers {
		set.Clear(cpu)
	}
	if set.Count() == 0 {
		return all, nil
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return set, err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return set, fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	return set, nil
}

// StartWorkers creates and starts one worker per configured CPU, with a
// handoff ring for every ordered pair of workers.
func (d *DPDK) StartWorkers(snap *lcore.Snapshot) error {
	dp := d.cfg.Dataplane
	if set, err := confineControlThreads(dp.Workers); err != nil {
		d.log.Warn("control threads not moved off the worker CPUs", zap.Error(err))
	} else {
		d.log.Info("control threads confined", zap.Int("cpus", set.Count()))
	}
	n := len(dp.Workers)
	handoffs := make([]lcore.Handoff, n)
	if n > 1 {
		for i := range handoffs {
			handoffs[i] = lcore.Handoff{Out: make([]*ring.Ring, n), In: make([]*ring.Ring, n)}
		}
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if i == j {
					continue
				}
				r, err := ring.Create(fmt.Sprintf("dplb_ho_%d_%d", i, j), handoffRingSize, eal.SocketAny, ring.SingleProducer|ring.SingleConsumer)
				if err != nil {
					return fmt.Errorf("dataplane.workers: handoff ring %d->%d: %w", i, j, err)
				}
				d.rings = append(d.rings, r)
				handoffs[i].Out[j], handoffs[j].In[i] = r, r
			}
		}
	}
	// One persistence template table for all workers: a client network's
	// connections land on every worker and must meet one template.
	templates, err := lcore.NewTemplates(dp.ConnTableSize)
	if err != nil {
		return fmt.Errorf("dataplane.conn_table_size: %w", err)
	}
	expects := lcore.NewExpectTable() // the FTP helper's data connections, for every worker
	for i, cpu := range dp.Workers {
		pqs := make([]lcore.PortQueue, len(d.ports))
		for j, p := range d.ports {
			pqs[j] = lcore.PortQueue{Port: p.id, RxQueue: uint16(i), TxQueue: uint16(i)}
			if uint16(i) >= p.queues {
				pqs[j] = lcore.PortQueue{Port: p.id, NoQueue: true, TxVia: i % int(p.queues)}
			}
			pqs[j].Kernel = d.kernel.has(j)
		}
		w, err := lcore.NewWorker(lcore.Config{
			ID: i, CPU: cpu, Ports: pqs, Pool: d.pool, Burst: dp.Burst,
			ConnTableSize: dp.ConnTableSize, IdleSleep: dp.IdleSleep, Snapshot: snap,
			Defense: conn.Defense{
				DropEntryPercent: dp.Defense.DropEntry, SecurePercent: dp.Defense.Secure, IdleAfter: dp.Defense.IdleAfter,
				SecureSYN: dp.Defense.SYNTimeout, SecureUDP: dp.Defense.UDPTimeout,
			},
			Fragments: lcore.FragLimits{Datagrams: dp.Fragments.Datagrams, Held: dp.Fragments.Held, Timeout: dp.Fragments.Timeout},
			Workers:   n, Handoff: handoffs[i], Templates: templates, Expects: expects, HoldRX: d.holdRX,
			Kernel: d.kernel.io(i),
		})
		if err != nil {
			return fmt.Errorf("dataplane.workers[%d]: %w", i, err)
		}
		if err := w.Start(); err != nil {
			w.Free()
			return fmt.Errorf("dataplane.workers[%d]: %w", i, err)
		}
		d.workers = append(d.workers, w)
		d.log.Info("lcore started", zap.Int("worker", i), zap.Int("cpu", cpu), zap.Int("conn_table", w.ConnTableCap()))
	}
	return nil
}

// HoldRX stops (true) or resumes (false) every worker's receiving; set
// before StartWorkers, the workers start held. A handover uses it: the
// starting lbd installs the handed-over table before the first packet is
// read, the stopping one dumps its table while no packet changes it.
func (d *DPDK) HoldRX(hold bool) {
	d.holdRX = hold
	for _, w := range d.workers {
		w.HoldRX(hold)
	}
}
