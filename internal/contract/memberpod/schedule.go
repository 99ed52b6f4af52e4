package memberpod

import (
	"fmt"

	"github.com/robfig/cron/v3"
)

// DefaultFullSnapshotSchedule is every 24 hours, the schedule of etcd-druid's sample Etcds (etcd-druid
// itself passes none, leaving etcd-backup-restore's own default). The operator renders it into the
// member-agent's --full-snapshot-schedule and the agent falls back to it, so both read one value.
const DefaultFullSnapshotSchedule = "0 */24 * * *"

// cronParser reads the standard five fields (minute hour day-of-month month day-of-week), as
// etcd-druid documents, plus descriptors such as @daily.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses a cron schedule of the Etcd's spec. The member pods parse their full
// snapshot schedule with it and the operator validates every schedule with it (the defragmentation
// schedule, which it runs itself, included), so the operator refuses what a member could not run.
func ParseSchedule(spec string) (cron.Schedule, error) {
	sched, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("cron schedule %q: %w", spec, err)
	}
	return sched, nil
}
