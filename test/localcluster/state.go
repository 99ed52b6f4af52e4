package localcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/etcd-conductor/etcd-conductor/test/localcluster/proc"
)

// recordProcesses writes WorkDir/processes.json in start order. It is
// rewritten on every start so a restarted controller-manager is recorded too.
func (c *Cluster) recordProcesses() error {
	var recs []proc.Recorded
	for _, p := range c.processes() {
		recs = append(recs, p.Record())
	}
	data, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return fmt.Errorf("encode process record: %w", err)
	}
	path := filepath.Join(c.workDir, processesFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write process record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write process record: %w", err)
	}
	return nil
}

// RecordedProcesses reads the processes a cluster in workDir started. A dir
// without a record gives an empty list.
func RecordedProcesses(workDir string) ([]proc.Recorded, error) {
	data, err := os.ReadFile(filepath.Join(workDir, processesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read process record: %w", err)
	}
	var recs []proc.Recorded
	if err := json.Unmarshal(data, &recs); err != nil {
		return nil, fmt.Errorf("decode %s: %w", filepath.Join(workDir, processesFile), err)
	}
	return recs, nil
}

// Running lists the recorded processes of workDir that still run.
func Running(workDir string) ([]proc.Recorded, error) {
	recs, err := RecordedProcesses(workDir)
	if err != nil {
		return nil, err
	}
	var alive []proc.Recorded
	for _, r := range recs {
		if r.IsRunning() {
			alive = append(alive, r)
		}
	}
	return alive, nil
}

// StopWorkDir stops the processes recorded in workDir, newest first, and
// removes workDir. It serves clusters started by another process, such as
// a detached `localcluster up`. log gets one line per stopped process.
func StopWorkDir(workDir string, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	recs, err := RecordedProcesses(workDir)
	if err != nil {
		return err
	}
	var errs []error
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if !r.IsRunning() {
			continue
		}
		if err := r.Stop(proc.DefaultGrace); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(log, "localcluster: stopped %s pid=%d\n", r.Name, r.PID)
	}
	if len(errs) > 0 {
		// Keep the dir: it holds the record needed to try again.
		return errors.Join(errs...)
	}
	if err := os.RemoveAll(workDir); err != nil {
		return fmt.Errorf("remove %s: %w", workDir, err)
	}
	return nil
}
