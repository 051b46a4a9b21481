package connector

import (
	"context"
	"io"
	"net/http"
	"strings"
)

const probeInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"reins-credential-probe","version":"1"}}}`

// Probe sends an MCP initialize request to serverURL with the bearer token.
// It returns nil when the server accepts it (2xx), the captured response
// (scrubbed of the token) otherwise, and an error when the server cannot
// be reached. A session the server opened is closed again. client should
// come from netguard.Guard.Client; nil means a client of the zero Guard.
// A redirect to another origin is not followed: it is the answer.
func Probe(ctx context.Context, client *http.Client, serverURL, token string) (*HTTPResponse, error) {
	client, release := guarded(client)
	defer release()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(probeInitialize))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Capture(resp, token), nil
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		del, err := http.NewRequestWithContext(ctx, http.MethodDelete, serverURL, nil)
		if err == nil {
			del.Header.Set("Mcp-Session-Id", sid)
			if token != "" {
				del.Header.Set("Authorization", "Bearer "+token)
			}
			if r, err := client.Do(del); err == nil {
				r.Body.Close()
			}
		}
	}
	return nil, nil
}
