//go:build !linux || !(amd64 || arm64)

package seccomp

import (
	"errors"
	"testing"
)

func TestInstallUnsupported(t *testing.T) {
	if err := Install(); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Install() = %v, want an error wrapping errors.ErrUnsupported", err)
	}
}
