package restore

import (
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// diskPeak samples the disk space allocated below dir (as du counts it: blocks, so sparse and
// half-written files count what they hold) until stop, and keeps the highest. A restore writes
// its data dir and its scratch beside each other, so one directory holding the data dir sees it
// all. Sampling can miss a peak shorter than the interval; the scratch files live for seconds.
type diskPeak struct {
	dir  string
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	peak int64
}

func startDiskPeak(dir string, every time.Duration) *diskPeak {
	p := &diskPeak{dir: dir, done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			p.sample()
			select {
			case <-p.done:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

// stop ends the sampling after one last sample and returns the peak in bytes.
func (p *diskPeak) stop() int64 {
	close(p.done)
	p.wg.Wait()
	p.sample()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

func (p *diskPeak) sample() {
	var total int64
	// Files come and go under a running restore: what vanished mid-walk is simply not counted.
	_ = filepath.WalkDir(p.dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	p.mu.Lock()
	p.peak = max(p.peak, total)
	p.mu.Unlock()
}
