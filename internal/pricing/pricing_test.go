package pricing

import (
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/model"
)

// TestCallExact: a call's cost is the exact sum of its tokens at the
// model's rates and its web searches, in picodollars.
func TestCallExact(t *testing.T) {
	tb := Default()
	// claude-sonnet-4-5: $3 in, $15 out, $0.30 read, $3.75 write per MTok;
	// a web search is $0.01.
	u := model.Usage{InputTokens: 1001, OutputTokens: 333, CacheReadInputTokens: 7, CacheCreationInputTokens: 11, WebSearchRequests: 2}
	got, ok := tb.Call("claude-sonnet-4-5-20250929", u)
	want := int64(1001*3_000_000 + 333*15_000_000 + 7*300_000 + 11*3_750_000 + 2*10_000_000_000)
	if !ok || got != want {
		t.Fatalf("Call = %d %v, want %d", got, ok, want)
	}
	if _, ok := tb.Call("scripted", u); ok {
		t.Fatal("the scripted model has a built-in price")
	}
}

// TestRuntimeAndCents: the runtime is $0.08 per active hour, exactly;
// reports round to the nearest cent, half up.
func TestRuntimeAndCents(t *testing.T) {
	tb := Default()
	if got := tb.Runtime(time.Hour); got.Cmp(big.NewRat(8*PicoPerCent, 1)) != 0 {
		t.Fatalf("an hour = %s pico", got.RatString())
	}
	// One second is 8e10/3600 pico: not an integer, kept exact.
	if got := tb.Runtime(time.Second); got.Cmp(big.NewRat(8*PicoPerCent, 3600)) != 0 {
		t.Fatalf("a second = %s pico", got.RatString())
	}
	for _, c := range []struct {
		pico int64
		want int64
	}{{0, 0}, {PicoPerCent/2 - 1, 0}, {PicoPerCent / 2, 1}, {PicoPerCent, 1}, {3*PicoPerCent + PicoPerCent/2 - 1, 3}, {52_500_000_000 * 10, 53}} {
		if got := Cents(big.NewRat(c.pico, 1)); got != c.want {
			t.Errorf("Cents(%d) = %d, want %d", c.pico, got, c.want)
		}
	}
	// Total: 1 pico of calls and half an hour (4 cents) rounds to 4.
	if got := Cents(tb.Total(1, 30*time.Minute)); got != 4 {
		t.Fatalf("total = %d cents", got)
	}
}

// TestLoad: a price file adds models and overrides the runtime and search
// prices; a negative price is refused.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.json")
	os.WriteFile(path, []byte(`{"models":{"scripted":{"input":0.5,"output":1}},"runtime_per_hour":0,"web_search_per_1000":20}`), 0o600)
	tb, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := tb.Call("scripted", model.Usage{InputTokens: 2, OutputTokens: 3, WebSearchRequests: 1})
	if !ok || got != 2*500_000+3*1_000_000+20_000_000_000 || tb.Runtime(time.Hour).Sign() != 0 || !tb.Priced("claude-haiku-4-5") {
		t.Fatalf("Call = %d %v", got, ok)
	}
	os.WriteFile(path, []byte(`{"models":{"x":{"input":-1}}}`), 0o600)
	if _, err := Load(path); err == nil {
		t.Fatal("a negative price loaded")
	}
}
