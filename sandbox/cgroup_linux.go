package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoot is where the host mounts its cgroup file systems.
const cgroupRoot = "/sys/fs/cgroup"

// cgroups makes one cgroup per sandbox (one per controller on cgroup v1)
// that bounds the memory, processes and CPU of the whole sandbox.
type cgroups struct {
	version string
	limits  Limits
	// parents are the directories the sandboxes' cgroups are made in:
	// one per controller on v1 ("memory", "pids", "cpu"), one on v2.
	parents map[string]string
}

// newCgroups finds a cgroup hierarchy the server may write to: cgroup v2
// with a delegated subtree, or cgroup v1's memory, pids and cpu
// controllers (as root).
func newCgroups(l Limits) (*cgroups, error) {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return newCgroupsV2(l)
	}
	parents := map[string]string{}
	for _, c := range []string{"memory", "pids", "cpu"} {
		dir := filepath.Join(cgroupRoot, c, "reins")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v1 %s controller: %w", c, err)
		}
		parents[c] = dir
	}
	return &cgroups{version: "cgroup v1", limits: l, parents: parents}, nil
}

// newCgroupsV2 makes a "reins-sandboxes" cgroup beside the server's own
// and enables the controllers sandboxes need in it. A cgroup with
// processes cannot give controllers to its children, so when the server's
// cgroup is the delegated one the server first moves itself into a leaf.
func newCgroupsV2(l Limits) (*cgroups, error) {
	own, err := ownCgroupV2()
	if err != nil {
		return nil, err
	}
	base := filepath.Join(cgroupRoot, own)
	enable := "+memory +pids +cpu"
	if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
		if !errors.Is(err, syscall.EBUSY) {
			return nil, fmt.Errorf("cgroup v2: enable controllers in %s: %w (delegate a cgroup to reins, e.g. systemd Delegate=yes)", base, err)
		}
		leaf := filepath.Join(base, "reins-server")
		if err := os.MkdirAll(leaf, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return nil, fmt.Errorf("cgroup v2: move the server into a leaf: %w", err)
		}
		if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
			return nil, fmt.Errorf("cgroup v2: enable controllers in %s: %w", base, err)
		}
	}
	dir := filepath.Join(base, "reins-sandboxes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
		return nil, fmt.Errorf("cgroup v2: enable controllers in %s: %w", dir, err)
	}
	return &cgroups{version: "cgroup v2", limits: l, parents: map[string]string{"": dir}}, nil
}

// ownCgroupV2 returns the server's cgroup v2 path ("0::/path").
func ownCgroupV2() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("cgroup v2: the server's cgroup is unknown")
}

// add makes the sandbox's cgroups, sets their limits and moves pid into
// them. It returns the directories made.
func (c *cgroups) add(name string, pid int) ([]string, error) {
	var made []string
	for ctrl, parent := range c.parents {
		dir := filepath.Join(parent, fmt.Sprintf("%s-%d", safeName(name), pid))
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			removeCgroups(made)
			return nil, err
		}
		made = append(made, dir)
		if err := c.limit(ctrl, dir); err != nil {
			removeCgroups(made)
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			removeCgroups(made)
			return nil, err
		}
	}
	return made, nil
}

// limit writes the limits of one controller (all of them on v2).
func (c *cgroups) limit(ctrl, dir string) error {
	l := c.limits
	period := 100000
	quota := strconv.Itoa(int(l.CPU * float64(period)))
	files := map[string]map[string]string{
		"memory": {"memory.limit_in_bytes": strconv.FormatInt(l.Memory, 10)},
		"pids":   {"pids.max": strconv.Itoa(l.Processes)},
		"cpu":    {"cpu.cfs_period_us": strconv.Itoa(period), "cpu.cfs_quota_us": quota},
		"": {"memory.max": strconv.FormatInt(l.Memory, 10), "memory.swap.max": "0",
			"pids.max": strconv.Itoa(l.Processes), "cpu.max": quota + " " + strconv.Itoa(period)},
	}
	for name, v := range files[ctrl] {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0); err != nil && !(name == "memory.swap.max" && os.IsNotExist(err)) {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// pidRecord is a sandbox's state file: enough to find and kill its init
// after a crash of the server, and to remove its cgroups.
type pidRecord struct {
	Pid     int      `json:"pid"`
	Start   string   `json:"start"` // the process's start time, so a reused pid is left alone
	Cgroups []string `json:"cgroups,omitempty"`
}

// procStart returns the start time of pid (field 22 of /proc/pid/stat).
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		if f := strings.Fields(s[i+1:]); len(f) > 19 {
			return f[19]
		}
	}
	return ""
}

// reapLeftovers kills the sandboxes a killed server left behind and
// removes their cgroups and state files.
func (m *Manager) reapLeftovers() {
	files, _ := filepath.Glob(filepath.Join(m.cfg.StateDir, "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		var rec pidRecord
		if err == nil && json.Unmarshal(b, &rec) == nil && rec.Pid > 1 {
			if rec.Start != "" && procStart(rec.Pid) == rec.Start {
				syscall.Kill(rec.Pid, syscall.SIGKILL)
				m.log.Info("killed a sandbox left by an earlier server", "pid", rec.Pid)
				for i := 0; i < 100 && procStart(rec.Pid) == rec.Start; i++ {
					waitBriefly()
				}
			}
			removeCgroups(rec.Cgroups)
		}
		os.Remove(f)
	}
}

func waitBriefly() { time.Sleep(10 * time.Millisecond) }

// safeName keeps the letters, digits, '_' and '-' of a sandbox name.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 64)])
}
