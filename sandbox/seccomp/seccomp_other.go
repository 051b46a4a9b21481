//go:build !linux || !(amd64 || arm64)

package seccomp

import (
	"errors"
	"fmt"
	"runtime"
)

// Install fails on this platform: the filter is built for linux/amd64 and
// linux/arm64 only, and running the sandbox without it is not an option.
func Install() error {
	return fmt.Errorf("seccomp: %s/%s: %w", runtime.GOOS, runtime.GOARCH, errors.ErrUnsupported)
}
