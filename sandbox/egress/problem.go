package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
)

// upstreamProblem describes an error from reaching or exchanging with an
// upstream host in the proxy's own words. Error texts from the network
// stack can quote what the upstream sent (Go's HTTP client quotes a
// malformed status line, which an echoing port fills with the request,
// credential and all), so the text of err is only looked at to choose a
// description, never copied into it.
func upstreamProblem(err error) string {
	var dns *net.DNSError
	var rec tls.RecordHeaderError
	var alert tls.AlertError
	var netErr net.Error
	switch {
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "its name does not resolve"
		}
		return "its name could not be resolved"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return "it did not answer in time"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "the connection was reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to it"
	case errors.As(err, &rec):
		return "it does not speak TLS on this port"
	case errors.As(err, &alert):
		return "it refused the TLS handshake"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "it closed the connection without an answer"
	case strings.Contains(err.Error(), "malformed HTTP"):
		return "its answer is not HTTP"
	}
	return "the exchange failed"
}

// certProblem describes why an upstream certificate failed verification
// without the names and dates it holds, which the upstream chose.
func certProblem(err error) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown):
		return "it is signed by an unknown authority"
	case errors.As(err, &host):
		return "it is not valid for this host name"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "it has expired or is not yet valid"
	case errors.As(err, &invalid):
		return "it is not valid"
	}
	return "it failed verification"
}
