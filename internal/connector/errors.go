package connector

import (
	"errors"
	"fmt"
)

// ErrorKind classifies a connection-level failure.
type ErrorKind int

// Error kinds.
const (
	// ConnectionFailed: the server is unreachable, answers 5xx, or the MCP
	// handshake fails. Retrying may help.
	ConnectionFailed ErrorKind = iota + 1
	// AuthenticationFailed: the server answers 401/403, or the matching
	// credential is expired, unusable or cannot be refreshed. Retrying does
	// not help.
	AuthenticationFailed
)

func (k ErrorKind) String() string {
	switch k {
	case ConnectionFailed:
		return "connection failed"
	case AuthenticationFailed:
		return "authentication failed"
	}
	return fmt.Sprintf("ErrorKind(%d)", int(k))
}

// SessionErrorType is the session.error type the kind is reported as.
func (k ErrorKind) SessionErrorType() string {
	if k == AuthenticationFailed {
		return "mcp_authentication_failed_error"
	}
	return "mcp_connection_failed_error"
}

// Error is a connection-level failure of one MCP server. Its Message never
// contains a secret and can be shown to the user.
type Error struct {
	Kind       ErrorKind
	ServerName string
	Message    string
	Err        error
}

func (e *Error) Error() string {
	return fmt.Sprintf("mcp server %q: %s", e.ServerName, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether retrying the turn may help.
func (e *Error) Retryable() bool { return e.Kind == ConnectionFailed }

// ErrClosed is returned by a closed Pool.
var ErrClosed = errors.New("connector: pool closed")

// ErrCredentialUnusable is wrapped by Credentials errors about a matching
// credential that cannot be used (expired, failed refresh, unreadable).
var ErrCredentialUnusable = errors.New("credential unusable")
