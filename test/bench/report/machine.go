package report

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// ThisMachine describes this host from /proc, for the results header.
func ThisMachine(note string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Note: note}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		if v, err := strconv.ParseFloat(strings.Fields(kb)[0], 64); err == nil {
			m.MemoryGiB = v / (1 << 20)
		}
	}
	m.LoadAtStart = LoadAverage()
	return m
}

// LoadAverage is the 1-minute load average, 0 when unknown.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// procField is the value of the first "name: value" line of a /proc file.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
