package tools

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bash timeouts.
const (
	DefaultBashTimeout = 2 * time.Minute
	MaxBashTimeout     = 10 * time.Minute
)

// shell is a persistent bash process: state such as the working directory
// and exported variables carries over from one command to the next.
type shell struct {
	w      *Workspace
	marker []byte

	proc  Proc
	stdin io.WriteCloser
	pr    *os.File    // read end of the output pipe
	out   chan []byte // output chunks; closed when the shell's output ends
	done  chan struct{}
}

func startShell(w *Workspace) (*shell, error) {
	var nonce [8]byte
	rand.Read(nonce[:])
	s := &shell{
		w:      w,
		marker: []byte("__reins_done_" + hex.EncodeToString(nonce[:]) + " "),
		out:    make(chan []byte, 64),
		done:   make(chan struct{}),
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	proc, err := w.launch.Launch(LaunchSpec{
		Argv: []string{"bash", "--noprofile", "--norc"}, Dir: w.procDir("."), Env: w.env(),
		Stdin: inR, Stdout: pw, Stderr: pw, Setpgid: true,
	})
	pw.Close()
	inR.Close()
	if err != nil {
		pr.Close()
		inW.Close()
		return nil, &Error{Code: CodeSpawnFailed, Msg: "bash could not be started", Err: err}
	}
	s.proc, s.stdin, s.pr = proc, inW, pr
	go func() { // owned by the shell: ends when the shell's output closes
		defer close(s.done)
		defer close(s.out)
		defer pr.Close()
		for {
			buf := make([]byte, 32<<10)
			n, err := pr.Read(buf)
			if n > 0 {
				s.out <- buf[:n]
			}
			if err != nil {
				proc.Wait()
				return
			}
		}
	}()
	return s, nil
}

// kill ends the shell and everything it started, and waits for it.
func (s *shell) kill() {
	s.proc.Signal(syscall.SIGKILL, true)
	s.stdin.Close()
	// A program that left the process group may still hold the pipe:
	// closing the read end ends the reader regardless.
	s.pr.Close()
	for range s.out { // drain so the reader can finish
	}
	<-s.done
}

// ansiC quotes s as a bash $'…' string.
func ansiC(s string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '\'' && c != '\\' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "\\x%02x", c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

var errShellExited = errors.New("the shell exited")

// run runs one command and returns its combined output (capped) and exit
// status. On a timeout or cancellation the shell is dead and must be
// replaced.
func (s *shell) run(ctx context.Context, command string, limit int) (string, int, error) {
	line := fmt.Sprintf("eval %s </dev/null 2>&1; printf '\\n%s%%d\\n' $?\n", ansiC(command), s.marker)
	if _, err := io.WriteString(s.stdin, line); err != nil {
		return "", -1, errShellExited
	}
	var head []byte
	var tail []byte
	dropped := 0
	keep := len(s.marker) + 16
	for {
		select {
		case chunk, ok := <-s.out:
			if !ok {
				return capped(head, tail, dropped, limit), -1, errShellExited
			}
			tail = append(tail, chunk...)
			if i := bytes.Index(tail, s.marker); i >= 0 {
				rest := tail[i+len(s.marker):]
				if j := bytes.IndexByte(rest, '\n'); j >= 0 {
					code, _ := strconv.Atoi(string(rest[:j]))
					out := tail[:i]
					out = bytes.TrimRight(out, "\n")
					return capped(head, out, dropped, limit), code, nil
				}
				continue
			}
			if len(tail) > keep {
				move := tail[:len(tail)-keep]
				room := max(0, limit-len(head))
				n := min(room, len(move))
				head = append(head, move[:n]...)
				dropped += len(move) - n
				tail = append([]byte(nil), tail[len(tail)-keep:]...)
			}
		case <-ctx.Done():
			return capped(head, tail, dropped, limit), -1, ctx.Err()
		}
	}
}

// capped joins the kept head and tail of a command's output (dropped bytes
// were skipped between them) and caps the result at limit bytes: the first
// three quarters and the last quarter, with a marker between.
func capped(head, tail []byte, dropped, limit int) string {
	all := append(head, tail...)
	if len(all) <= limit {
		if dropped == 0 {
			return string(all)
		}
		return string(head) + fmt.Sprintf("\n[output truncated: %d bytes omitted]\n", dropped) + string(tail)
	}
	h := limit * 3 / 4
	t := limit - h
	omitted := len(all) - h - t + dropped
	return string(all[:h]) + fmt.Sprintf("\n[output truncated: %d bytes omitted]\n", omitted) + string(all[len(all)-t:])
}

// bashRunner is the bash tool of one session: one persistent shell, one
// command at a time.
type bashRunner struct {
	w *Workspace

	mu    sync.Mutex // guards shell; held for a whole command, so that commands run one at a time
	shell *shell
}

func (b *bashRunner) call(ctx context.Context, in *BashInput) Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	if in.Restart {
		if b.shell != nil {
			b.shell.kill()
			b.shell = nil
		}
		if in.Command == "" {
			return textResult("the shell was restarted")
		}
	}
	if b.shell == nil {
		sh, err := startShell(b.w)
		if err != nil {
			return errorResult(err)
		}
		b.shell = sh
	}
	timeout := DefaultBashTimeout
	if in.TimeoutMS > 0 {
		timeout = min(time.Duration(in.TimeoutMS)*time.Millisecond, MaxBashTimeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, code, err := b.shell.run(ctx, in.Command, b.w.opts.MaxOutputBytes)
	if err != nil {
		b.shell.kill()
		b.shell = nil
		res := Result{IsError: true}
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			res.ErrorCode = CodeTimeout
			out += fmt.Sprintf("\n[the command timed out after %s; the shell was restarted]", timeout)
		case errors.Is(err, context.Canceled):
			res.ErrorCode = CodeCanceled
			out += "\n[the command was canceled; the shell was restarted]"
		default:
			res.ErrorCode = CodeToolFailed
			out += "\n[the shell exited; the next command starts a new one]"
		}
		res.Content = []Block{{Type: "text", Text: out}}
		return res
	}
	if code != 0 {
		out += fmt.Sprintf("\n[exit status %d]", code)
	}
	return textResult(out)
}

func (b *bashRunner) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shell != nil {
		b.shell.kill()
		b.shell = nil
	}
}
