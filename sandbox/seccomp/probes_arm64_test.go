//go:build linux

package seccomp

// archProbes returns no probes: the calls that only amd64 has are absent.
func archProbes() []probe { return nil }
