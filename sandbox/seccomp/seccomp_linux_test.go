//go:build linux && (amd64 || arm64)

package seccomp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The filter cannot be removed once installed, so the tests that need it run
// in a child: the test binary re-executed with childEnv set to a mode.
const (
	childEnv = "REINS_SECCOMP_TEST_CHILD"
	dirEnv   = "REINS_SECCOMP_TEST_DIR"

	modeFiltered = "filtered" // Install, then probes, sweep and shells
	modeControl  = "control"  // the same without Install
	modeExec     = "exec"     // Install, then exec the shell script
)

// shellScript is what the shells run under the filter: fork, pipes, command
// substitution, a FIFO, and system(3), which glibc runs through
// posix_spawn and clone3, falling back to clone on ENOSYS.
const shellScript = `grep '^Seccomp:' /proc/self/status
echo ok
mkfifo x
ls
true | cat
echo piped | cat
echo "$(echo sub)"
awk 'BEGIN { exit system("echo spawned") }'
if command -v unshare >/dev/null; then
	unshare -U true 2>/dev/null && echo unshare-ran || echo unshare-refused
fi
`

// report is what a child prints, as JSON, for the parent to check.
type report struct {
	InstallErr string
	Probes     map[string]int    // errno of each probe, 0 for success
	Sweep      map[string]int    // errno of each unconditional rule
	Shells     map[string]string // output of each shell, then its error
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode, os.Getenv(dirEnv)))
	}
	os.Exit(m.Run())
}

// child runs in the re-executed test binary. It locks its thread for good:
// the filter belongs to that thread, and every probe must run on it.
func child(mode, dir string) int {
	runtime.LockOSThread()
	if mode == modeExec {
		if err := Install(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		err := syscall.Exec("/bin/sh", []string{"sh", "-c", shellScript}, os.Environ())
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var rep report
	if mode == modeFiltered {
		if err := Install(); err != nil {
			rep.InstallErr = err.Error()
		} else {
			rep.Sweep = sweep()
		}
	}
	rep.Probes = map[string]int{}
	for _, p := range probes() {
		rep.Probes[p.name] = errnoOf(p.call(dir))
	}
	rep.Shells = shells(dir)
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// sweep calls every unconditional rule's system call with all arguments
// set to ^0, which the kernel would refuse (bad pointers, descriptors,
// commands) if the filter let the call through. vhangup has no arguments
// and is left out.
func sweep() map[string]int {
	got := map[string]int{}
	for _, r := range rules() {
		if r.nr == absent || r.when.op != always || r.name == "vhangup" {
			continue
		}
		const bad = ^uintptr(0)
		_, _, errno := unix.Syscall6(uintptr(r.nr), bad, bad, bad, bad, bad, bad)
		got[r.name] = int(errno)
	}
	return got
}

// shells runs shellScript with each shell there is, from this thread.
func shells(dir string) map[string]string {
	out := map[string]string{}
	for _, sh := range []string{"/bin/sh", "/bin/bash"} {
		if _, err := os.Stat(sh); err != nil {
			continue
		}
		cmd := exec.Command(sh, "-c", shellScript)
		cmd.Dir, _ = os.MkdirTemp(dir, "sh")
		b, err := cmd.CombinedOutput()
		out[sh] = fmt.Sprintf("%s%v", b, err)
	}
	return out
}

// errnoOf returns the errno in err, 0 for nil, -1 for any other error.
func errnoOf(err error) int {
	var errno unix.Errno
	switch {
	case err == nil:
		return 0
	case errors.As(err, &errno):
		return int(errno)
	}
	return -1
}

// runChild runs the test binary as a child in mode and returns its
// standard output.
func runChild(t *testing.T, mode string) []byte {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, dirEnv+"="+dir)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child %s: %v\nstdout:\n%s\nstderr:\n%s", mode, err, out, &stderr)
	}
	return out
}

// childReport runs a child in mode and decodes its report.
func childReport(t *testing.T, mode string) report {
	t.Helper()
	var rep report
	if err := json.Unmarshal(runChild(t, mode), &rep); err != nil {
		t.Fatalf("child %s: %v", mode, err)
	}
	if rep.InstallErr != "" {
		t.Fatalf("child %s: Install: %s", mode, rep.InstallErr)
	}
	return rep
}

// errnoName names an errno as the report holds it.
func errnoName(n int) string {
	if n <= 0 {
		return fmt.Sprintf("%d", n)
	}
	return fmt.Sprintf("%d (%v)", n, unix.Errno(n))
}

func TestProbesUnderFilter(t *testing.T) {
	rep := childReport(t, modeFiltered)
	for _, p := range probes() {
		got, ok := rep.Probes[p.name]
		if !ok {
			t.Errorf("%s: no result", p.name)
			continue
		}
		if got != int(p.filtered) {
			t.Errorf("%s under the filter: errno %s, want %s", p.name, errnoName(got), errnoName(int(p.filtered)))
		}
	}
}

// TestProbesWithoutFilter runs the probes in a child that does not install
// the filter, to show that each EPERM and ENOSYS above comes from the
// filter and not from the kernel.
func TestProbesWithoutFilter(t *testing.T) {
	rep := childReport(t, modeControl)
	root := unix.Geteuid() == 0
	for _, p := range probes() {
		got := rep.Probes[p.name]
		if p.privileged && !root {
			t.Logf("%s: not root, skipping (got %s)", p.name, errnoName(got))
			continue
		}
		if p.optional && got == int(unix.ENOSYS) {
			continue
		}
		if got != int(p.unfiltered) {
			t.Errorf("%s without the filter: errno %s, want %s", p.name, errnoName(got), errnoName(int(p.unfiltered)))
		}
	}
}

func TestSweepUnderFilter(t *testing.T) {
	rep := childReport(t, modeFiltered)
	if len(rep.Sweep) == 0 {
		t.Fatal("sweep called nothing")
	}
	for _, r := range rules() {
		got, ok := rep.Sweep[r.name]
		if !ok {
			continue
		}
		if got != int(r.errno) {
			t.Errorf("%s(^0, ...): errno %s, want %s", r.name, errnoName(got), errnoName(int(r.errno)))
		}
	}
}

// checkShell checks the output of shellScript run under the filter.
func checkShell(t *testing.T, name, out string) {
	t.Helper()
	for _, want := range []string{"Seccomp:\t2\n", "ok\n", "x\n", "piped\n", "sub\n", "spawned\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: output lacks %q:\n%s", name, want, out)
		}
	}
	if strings.Contains(out, "unshare-ran") {
		t.Errorf("%s: unshare -U ran under the filter:\n%s", name, out)
	}
}

func TestShellsUnderFilter(t *testing.T) {
	rep := childReport(t, modeFiltered)
	if len(rep.Shells) == 0 {
		t.Fatal("no shell ran")
	}
	for sh, out := range rep.Shells {
		if !strings.HasSuffix(out, "<nil>") {
			t.Errorf("%s failed under the filter:\n%s", sh, out)
		}
		checkShell(t, sh, out)
	}
}

// TestShellsWithoutFilter shows that the shell checks can fail: without the
// filter the status says so, and unshare -U (when installed) runs.
func TestShellsWithoutFilter(t *testing.T) {
	rep := childReport(t, modeControl)
	for sh, out := range rep.Shells {
		if strings.Contains(out, "Seccomp:\t2\n") {
			t.Errorf("%s: seccomp filter reported without Install:\n%s", sh, out)
		}
		if unix.Geteuid() == 0 && strings.Contains(out, "unshare-refused") {
			t.Errorf("%s: unshare -U refused without the filter:\n%s", sh, out)
		}
	}
}

// TestExec takes the path of the sandbox helper: Install, then execve.
func TestExec(t *testing.T) {
	checkShell(t, "exec /bin/sh", string(runChild(t, modeExec)))
}
