package cli

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/spf13/cobra"

	"github.com/reinsdev/reins/internal/app"
)

// defaultURL is where `reins serve` listens unless told otherwise.
const defaultURL = "http://127.0.0.1:4180"

// Output formats of --output.
const (
	outputText = "text"
	outputJSON = "json"
)

// clientFlags are the connection and output flags shared by the client
// commands (agents, environments, sessions).
type clientFlags struct {
	url     string
	apiKey  string
	dataDir string
	output  string
}

// addClientFlags registers the shared flags on a command group as
// persistent flags. Defaults are resolved when a command runs, so that
// --help never prints a key taken from the environment.
func addClientFlags(cmd *cobra.Command) *clientFlags {
	f := &clientFlags{}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.url, "url", "", "server URL (REINS_URL, else http://$REINS_ADDR, else "+defaultURL+")")
	pf.StringVar(&f.apiKey, "api-key", "", "reins API key (REINS_API_KEY, else the api-key file in the data dir)")
	pf.StringVar(&f.dataDir, "data-dir", "", "data directory holding the api-key file (REINS_DATA_DIR, else "+defaultDataDir()+")")
	pf.StringVarP(&f.output, "output", "o", outputText, "output format: text or json")
	return f
}

// apiClient is the official SDK client with what the CLI needs to explain
// its failures.
type apiClient struct {
	anthropic.Client
	// url is the server URL used.
	url string
	// keySource says where the API key came from, never the key.
	keySource string
	output    string
	transport *http.Transport
}

// close releases the client's idle connections.
func (c *apiClient) close() { c.transport.CloseIdleConnections() }

// newClient resolves the flags and environment into an SDK client.
func (f *clientFlags) newClient() (*apiClient, error) {
	if f.output != outputText && f.output != outputJSON {
		return nil, fmt.Errorf("--output: want text or json, got %q", f.output)
	}
	base, err := checkServerURL(f.serverURL())
	if err != nil {
		return nil, err
	}
	key, source, err := f.resolveKey()
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	c := anthropic.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(&http.Client{Transport: transport}),
		option.WithBaseURL(base),
		option.WithAPIKey(key),
		// The CLI reports failures at once; the person decides to retry.
		option.WithMaxRetries(0),
	)
	return &apiClient{Client: c, url: base, keySource: source, output: f.output, transport: transport}, nil
}

// serverURL is --url, else $REINS_URL, else the address `reins serve`
// reads from $REINS_ADDR, else the default. The ANTHROPIC_* variables are
// never read: they configure `reins serve`'s own connection to Anthropic.
func (f *clientFlags) serverURL() string {
	return firstNonEmpty(f.url, os.Getenv("REINS_URL"), addrURL(os.Getenv("REINS_ADDR")), defaultURL)
}

// checkServerURL refuses what is not a server's base URL, before a
// request fails obscurely: a missing scheme, or the API's /v1 prefix.
func checkServerURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--url: %q is not a server URL; give one such as %s", s, defaultURL)
	}
	if p := strings.TrimSuffix(u.Path, "/"); p == "/v1" {
		return "", fmt.Errorf("--url: give the server's base URL without /v1, such as %s://%s", u.Scheme, u.Host)
	}
	return s, nil
}

// addrURL turns a listen address (host:port) into the URL a client on this
// machine reaches it at: an unspecified host is loopback. It returns ""
// for "".
func addrURL(addr string) string {
	if addr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// resolveKey returns the reins API key and a description of its source:
// --api-key, else $REINS_API_KEY, else the key file in the data dir. An
// Anthropic key ($ANTHROPIC_API_KEY) is never a reins key and is not read.
func (f *clientFlags) resolveKey() (key, source string, err error) {
	if f.apiKey != "" {
		return f.apiKey, "the --api-key flag", nil
	}
	if v := os.Getenv("REINS_API_KEY"); v != "" {
		return v, "$REINS_API_KEY", nil
	}
	dir := firstNonEmpty(f.dataDir, os.Getenv("REINS_DATA_DIR"), defaultDataDir())
	path := filepath.Join(dir, app.KeyFile)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", "", fmt.Errorf("no API key: pass --api-key, set REINS_API_KEY, or start `reins serve` once with --data-dir %s so it writes %s", dir, path)
	case err != nil:
		return "", "", fmt.Errorf("read API key: %w", err)
	}
	key = strings.TrimSpace(string(b))
	if key == "" {
		return "", "", fmt.Errorf("the API key file %s is empty", path)
	}
	return key, "the key file " + path, nil
}

// explain turns an SDK error into a message for a person: which server
// could not be reached, which key source was refused, what the API said.
// The SDK error stays in the chain for errors.As.
func (c *apiClient) explain(err error) error {
	if err == nil {
		return nil
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = strings.TrimSpace(apiErr.RawJSON())
		}
		t := string(apiErr.Type())
		if t == "" {
			t = "error"
		}
		switch apiErr.StatusCode {
		case 401:
			hint := "check the key, or create one with `reins keys create`"
			return &explained{fmt.Sprintf("the server at %s rejected the API key from %s (HTTP 401 %s); %s", c.url, c.keySource, t, hint), err}
		case 403:
			return &explained{fmt.Sprintf("the API key from %s may not do this (HTTP 403 %s): %s", c.keySource, t, msg), err}
		}
		return &explained{fmt.Sprintf("%s (HTTP %d %s)", msg, apiErr.StatusCode, t), err}
	}
	var opErr *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &opErr) && opErr.Op == "dial") {
		return &explained{fmt.Sprintf("cannot reach the reins server at %s (%v); is it running? Start one with `reins serve`, or point --url or REINS_URL at yours",
			c.url, rootCause(err)), err}
	}
	return err
}

// explained is an error whose message was written for a person; the
// original error stays in the chain.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// rootCause is the innermost error of a chain of single wrappers.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// withClient makes a command's RunE that builds the SDK client, runs fn
// and explains an API failure for a person.
func (f *clientFlags) withClient(fn func(cmd *cobra.Command, args []string, c *apiClient) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := f.newClient()
		if err != nil {
			return err
		}
		defer c.close()
		err = fn(cmd, args, c)
		var done *explained
		if errors.As(err, &done) {
			return err
		}
		return c.explain(err)
	}
}
