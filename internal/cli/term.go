package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
)

// isTerminal reports whether v is a terminal file.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// useColor is whether to colour output written to w: a terminal, and
// NO_COLOR unset (https://no-color.org).
func useColor(w io.Writer) bool {
	return isTerminal(w) && os.Getenv("NO_COLOR") == ""
}

// console writes rendered output and, on a terminal, draws a spinner on
// the current line while the session works. Writes clear the spinner
// first, so output never mixes with it.
type console struct {
	mu      sync.Mutex // guards the fields below; held for each write to w
	w       io.Writer
	color   bool
	spin    bool // spinning wanted
	shown   bool // a spinner frame is on screen
	frame   int
	stop    chan struct{}
	stopped chan struct{}
}

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// newConsole returns a console on w; animated starts the spinner's
// ticker (terminals only), drawn dim when color is set. Close stops it.
func newConsole(w io.Writer, animated, color bool) *console {
	c := &console{w: w, color: color}
	if animated {
		c.stop = make(chan struct{})
		c.stopped = make(chan struct{})
		go c.run()
	}
	return c
}

func (c *console) run() {
	defer close(c.stopped)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.mu.Lock()
			if c.spin {
				c.frame = (c.frame + 1) % len(spinnerFrames)
				frame := spinnerFrames[c.frame] + " working…"
				if c.color {
					frame = "\x1b[2m" + frame + "\x1b[0m"
				}
				fmt.Fprintf(c.w, "\r%s\x1b[K", frame)
				c.shown = true
			}
			c.mu.Unlock()
		}
	}
}

// Write writes text, then sets whether the spinner should run.
func (c *console) Write(text string, spin bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clear()
	c.spin = spin && c.stop != nil
	if text == "" {
		return nil
	}
	_, err := io.WriteString(c.w, text)
	return err
}

// clear removes a spinner frame; c.mu is held.
func (c *console) clear() {
	if c.shown {
		io.WriteString(c.w, "\r\x1b[K")
		c.shown = false
	}
}

// Close stops the spinner and clears it.
func (c *console) Close() {
	if c.stop != nil {
		close(c.stop)
		<-c.stopped
		c.stop = nil
	}
	c.mu.Lock()
	c.clear()
	c.spin = false
	c.mu.Unlock()
}

// lineReader reads lines from the person, one read at a time. A read
// abandoned when its context ends (Ctrl-C) is not lost: its line goes to
// the next read.
type lineReader struct {
	in      *bufio.Reader
	results chan lineResult
	pending bool
}

type lineResult struct {
	s   string
	err error
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{in: bufio.NewReader(r), results: make(chan lineResult, 1)}
}

// read returns the next line without its newline. The reading goroutine
// of an abandoned read ends with the process or the next line.
func (l *lineReader) read(ctx context.Context) (string, error) {
	if !l.pending {
		l.pending = true
		go func() {
			s, err := l.in.ReadString('\n')
			l.results <- lineResult{strings.TrimRight(s, "\r\n"), err}
		}()
	}
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case r := <-l.results:
		l.pending = false
		if r.err != nil && r.s == "" {
			return "", r.err
		}
		return r.s, nil
	}
}

// asker reads answers from the person at the terminal.
type asker struct {
	in  *lineReader
	out *console
}

// ask prints question and reads one line. Reading stops when ctx ends
// (Ctrl-C).
func (a *asker) ask(ctx context.Context, question string) (string, error) {
	if err := a.out.Write(question, false); err != nil {
		return "", err
	}
	s, err := a.in.read(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		return "", fmt.Errorf("read answer: %w", err)
	}
	return strings.TrimSpace(s), nil
}

// confirm asks a yes/no question; only "y" or "yes" is yes.
func (a *asker) confirm(ctx context.Context, question string) (bool, error) {
	s, err := a.ask(ctx, question+" [y/N] ")
	if err != nil {
		return false, err
	}
	s = strings.ToLower(s)
	return s == "y" || s == "yes", nil
}
