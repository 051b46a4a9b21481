package cobra

import "syscall"

// SetSignal replaces how the binding signals process groups, so tests can
// simulate descendants that cannot be stopped.
func SetSignal(o *Options, f func(pgid int, sig syscall.Signal) error) { o.signal = f }
