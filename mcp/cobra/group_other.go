//go:build !unix

package cobra

import (
	"errors"
	"os/exec"
	"syscall"
)

type sysSignal = syscall.Signal

// The binding needs Unix process groups; elsewhere every call fails to
// start (unavailable) rather than run unsupervised.
var errNoGroups = errors.New("mcpcobra: process groups are only supported on Unix")

func ownGroup(cmd *exec.Cmd) { cmd.Path = "" }

func signalGroup(int, sysSignal) error { return errNoGroups }

func groupAlive(int) bool { return false }
