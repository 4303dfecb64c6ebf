package testenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// PeakRSS reads a live process's high-water resident set size (VmHWM) in
// bytes, for tests and benchmarks that bound memory.
func PeakRSS(pid int) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("peak rss of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("peak rss of %d: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("peak rss of %d: no VmHWM (has it exited?)", pid)
}
