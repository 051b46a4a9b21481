package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// The control protocol between the server and a sandbox's init: one JSON
// message per SOCK_SEQPACKET datagram, file descriptors attached with
// SCM_RIGHTS.
const (
	opSetup   = "setup"   // server → init: what to set up (Init), the first message
	opReady   = "ready"   // init → server: set up; the proxy listener is attached
	opFailed  = "failed"  // init → server: setup failed (Err)
	opSpawn   = "spawn"   // server → init: start a process; stdin, stdout, stderr attached
	opStarted = "started" // init → server: the process of ID started (Pid) or not (Err)
	opSignal  = "signal"  // server → init: send Sig to Pid (its group when Group)
	opExit    = "exit"    // init → server: Pid ended with Status
)

// Bounds of one control message: what init reads (a spawn carries an
// argv and environment) and what the server reads (init's short replies).
const (
	maxToInit   = 256 << 10
	maxToServer = 4 << 10
)

// msg is a control message.
type msg struct {
	Op     string   `json:"op"`
	ID     uint64   `json:"id,omitempty"`
	Argv   []string `json:"argv,omitempty"`
	Env    []string `json:"env,omitempty"`
	Dir    string   `json:"dir,omitempty"`
	Flags  int      `json:"flags,omitempty"`
	Pid    int      `json:"pid,omitempty"`
	Sig    int      `json:"sig,omitempty"`
	Group  bool     `json:"group,omitempty"`
	Status int      `json:"status,omitempty"`
	Err    string   `json:"err,omitempty"`
	// Init is the sandbox's configuration. It reaches init on the control
	// socket rather than on its command line, which every process of
	// the sandbox can read in /proc/1/cmdline: it holds host paths.
	Init *initConfig `json:"init,omitempty"`
}

// Spawn flags.
const (
	flagSetsid = 1 << iota
	flagSetctty
	flagSetpgid
)

// conn is one end of the control socket. recv is not safe for
// concurrent use (one reader), send is.
type conn struct {
	c   *net.UnixConn
	buf []byte // what recv reads into
	oob []byte
}

func newConn(f *os.File, max int) (*conn, error) {
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("sandbox: control socket: %w", err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, errors.New("sandbox: control socket is not a unix socket")
	}
	return &conn{c: uc, buf: make([]byte, max), oob: make([]byte, unix.CmsgSpace(4*8))}, nil
}

func (c *conn) send(m msg, files ...*os.File) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	_, _, err = c.c.WriteMsgUnix(b, oob, nil)
	return err
}

// recv reads one message and the files attached to it.
func (c *conn) recv() (msg, []*os.File, error) {
	b, oob := c.buf, c.oob
	n, oobn, flags, _, err := c.c.ReadMsgUnix(b, oob)
	if err != nil {
		return msg{}, nil, err
	}
	files, ferr := parseRights(oob[:oobn])
	if n == 0 && oobn == 0 {
		return msg{}, nil, net.ErrClosed
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		closeAll(files)
		return msg{}, nil, errors.New("sandbox: control message truncated")
	}
	if ferr != nil {
		return msg{}, nil, ferr
	}
	var m msg
	if err := json.Unmarshal(b[:n], &m); err != nil {
		closeAll(files)
		return msg{}, nil, fmt.Errorf("sandbox: control message: %w", err)
	}
	return m, files, nil
}

func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	cmsgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("sandbox: control message: %w", err)
	}
	var files []*os.File
	for _, cm := range cmsgs {
		fds, err := unix.ParseUnixRights(&cm)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), "fd"))
		}
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

func (c *conn) Close() error { return c.c.Close() }
