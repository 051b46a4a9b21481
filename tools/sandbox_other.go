//go:build !linux

package tools

import "log/slog"

type sandbox struct{}

func newSandbox(dir string, readOnly bool, tmp string, logger *slog.Logger) *sandbox {
	logger.Warn("landlock is only available on Linux: bash and processes run without file system confinement", "workspace", dir)
	return &sandbox{}
}

func (s *sandbox) enabled() bool               { return false }
func (s *sandbox) start(fn func() error) error { return fn() }
func (s *sandbox) close()                      {}
