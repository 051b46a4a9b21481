//go:build unix

package cobra

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
)

type sysSignal = syscall.Signal

// ownGroup makes the child the leader of a new process group.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends sig to every process of the group; an empty group is
// not an error.
func signalGroup(pgid int, sig sysSignal) error {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// groupAlive reports whether a live (non-zombie) process is left in the
// group. On Linux it reads /proc, so that zombies awaiting a reaper that
// never comes do not count; elsewhere it probes with signal 0.
func groupAlive(pgid int) bool {
	if runtime.GOOS != "linux" {
		return syscall.Kill(-pgid, 0) == nil
	}
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 {
			continue
		}
		if g, _ := strconv.Atoi(string(f[2])); g == pgid && f[0][0] != 'Z' && f[0][0] != 'X' {
			return true
		}
	}
	return false
}
