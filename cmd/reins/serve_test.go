package main

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestServeOutboundAllow: --outbound-allow reads REINS_OUTBOUND_ALLOW by
// default and refuses an entry that is not an address or prefix before
// anything starts.
func TestServeOutboundAllow(t *testing.T) {
	t.Setenv("REINS_OUTBOUND_ALLOW", "127.0.0.1/32,::1")
	got, err := newServeCommand().Flags().GetStringSlice("outbound-allow")
	if err != nil || !slices.Equal(got, []string{"127.0.0.1/32", "::1"}) {
		t.Fatalf("--outbound-allow default = %q, %v", got, err)
	}
	r := execute(context.Background(), "", "serve", "--data-dir", t.TempDir(), "--sandbox", "none", "--outbound-allow", "localhost")
	if r.err == nil || !strings.Contains(r.err.Error(), "--outbound-allow") || !strings.Contains(r.err.Error(), `"localhost"`) {
		t.Fatalf("serve --outbound-allow localhost: %v", r.err)
	}
}
