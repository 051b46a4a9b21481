// Package pricing prices what a session consumes at list rates: each
// model's tokens, the server tools the model's API ran, and the session's
// runtime. Amounts are exact: integer picodollars (1e-12 USD) for tokens
// and tool calls, and a rational number once the runtime (priced per hour,
// counted in milliseconds) joins them. Only reports round, to the cent.
package pricing

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"regexp"
	"time"

	"github.com/reinsdev/reins/internal/model"
)

// PicoPerCent is the picodollars of one US cent.
const PicoPerCent = 10_000_000_000

// Price is a model's list prices in US dollars per million tokens.
type Price struct {
	Input        float64 `json:"input"`
	Output       float64 `json:"output"`
	CacheRead    float64 `json:"cache_read"`
	CacheWrite5m float64 `json:"cache_write_5m"`
	CacheWrite1h float64 `json:"cache_write_1h"`
}

// File is a price file as an operator writes it: models it prices (added
// to the built-in ones, or replacing them), and the runtime and web
// search prices when given.
type File struct {
	Models map[string]Price `json:"models"`
	// RuntimePerHour is the price of an active session-hour, in dollars.
	RuntimePerHour *float64 `json:"runtime_per_hour"`
	// WebSearchPer1000 is the price of 1,000 web searches, in dollars.
	WebSearchPer1000 *float64 `json:"web_search_per_1000"`
}

// rates is a Price in microdollars per million tokens, that is
// picodollars per token.
type rates struct {
	input, output, cacheRead, cacheWrite5m, cacheWrite1h int64
}

// Table is a price list. The zero Table prices nothing. It is immutable
// and safe for concurrent use.
type Table struct {
	models    map[string]rates
	runtime   int64 // microdollars per active hour
	webSearch int64 // microdollars per 1,000 searches
}

// Built-in prices (see docs/usage.md for their source and date).
const (
	// DefaultRuntimePerHour is the price of an active session-hour.
	DefaultRuntimePerHour = 0.08
	// DefaultWebSearchPer1000 is the price of 1,000 web searches.
	DefaultWebSearchPer1000 = 10.0
)

// listPrice is the usual list price shape of a Claude model: cache reads
// at a tenth of the input price, 5-minute cache writes at 1.25 times and
// 1-hour writes at twice the input price.
func listPrice(input, output float64) Price {
	return Price{Input: input, Output: output, CacheRead: input / 10, CacheWrite5m: input * 1.25, CacheWrite1h: input * 2}
}

// builtin are the built-in list prices, per million tokens.
func builtin() map[string]Price {
	return map[string]Price{
		"claude-opus-4-6":   listPrice(5, 25),
		"claude-opus-4-5":   listPrice(5, 25),
		"claude-opus-4-1":   listPrice(15, 75),
		"claude-opus-4-0":   listPrice(15, 75),
		"claude-opus-4":     listPrice(15, 75),
		"claude-sonnet-4-6": listPrice(3, 15),
		"claude-sonnet-4-5": listPrice(3, 15),
		"claude-sonnet-4-0": listPrice(3, 15),
		"claude-sonnet-4":   listPrice(3, 15),
		"claude-haiku-4-5":  listPrice(1, 5),
	}
}

// Default is the table of the built-in prices.
func Default() *Table {
	t, err := build(File{})
	if err != nil {
		panic(err) // the built-in prices are valid
	}
	return t
}

// Load reads a price file (JSON, as File) and returns the built-in table
// with it applied.
func Load(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("price file: %w", err)
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("price file %s: %w", path, err)
	}
	t, err := build(f)
	if err != nil {
		return nil, fmt.Errorf("price file %s: %w", path, err)
	}
	return t, nil
}

// build applies f to the built-in prices.
func build(f File) (*Table, error) {
	prices := builtin()
	for id, p := range f.Models {
		prices[id] = p
	}
	t := &Table{models: make(map[string]rates, len(prices))}
	for id, p := range prices {
		r, err := p.rates()
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", id, err)
		}
		t.models[id] = r
	}
	runtime, search := DefaultRuntimePerHour, DefaultWebSearchPer1000
	if f.RuntimePerHour != nil {
		runtime = *f.RuntimePerHour
	}
	if f.WebSearchPer1000 != nil {
		search = *f.WebSearchPer1000
	}
	var err error
	if t.runtime, err = micro("runtime_per_hour", runtime); err != nil {
		return nil, err
	}
	if t.webSearch, err = micro("web_search_per_1000", search); err != nil {
		return nil, err
	}
	return t, nil
}

func (p Price) rates() (rates, error) {
	var r rates
	var err error
	for _, f := range []struct {
		name string
		v    float64
		into *int64
	}{{"input", p.Input, &r.input}, {"output", p.Output, &r.output}, {"cache_read", p.CacheRead, &r.cacheRead},
		{"cache_write_5m", p.CacheWrite5m, &r.cacheWrite5m}, {"cache_write_1h", p.CacheWrite1h, &r.cacheWrite1h}} {
		if *f.into, err = micro(f.name, f.v); err != nil {
			return r, err
		}
	}
	return r, nil
}

// micro converts a dollar price to microdollars: prices are exact to the
// microdollar.
func micro(name string, dollars float64) (int64, error) {
	if dollars < 0 || math.IsNaN(dollars) || dollars > 1e6 {
		return 0, fmt.Errorf("%s: must be a price in dollars from 0 to 1000000, got %v", name, dollars)
	}
	return int64(math.Round(dollars * 1e6)), nil
}

// dated is a model id's date suffix.
var dated = regexp.MustCompile(`-\d{8}$`)

// lookup finds a model's rates: its id as given, or without a date suffix
// (claude-haiku-4-5-20251001 is priced as claude-haiku-4-5).
func (t *Table) lookup(id string) (rates, bool) {
	if t == nil {
		return rates{}, false
	}
	if r, ok := t.models[id]; ok {
		return r, true
	}
	r, ok := t.models[dated.ReplaceAllString(id, "")]
	return r, ok
}

// Priced reports whether a model has a list price.
func (t *Table) Priced(id string) bool {
	_, ok := t.lookup(id)
	return ok
}

// Call is the list cost of one model call in picodollars: its tokens at
// the model's prices and its web searches. ok is false when the model has
// no list price. Cache writes are priced at the 5-minute rate: a
// provider's usage does not split them by lifetime.
func (t *Table) Call(id string, u model.Usage) (pico int64, ok bool) {
	r, ok := t.lookup(id)
	if !ok {
		return 0, false
	}
	pico = u.InputTokens*r.input + u.OutputTokens*r.output + u.CacheReadInputTokens*r.cacheRead +
		u.CacheCreationInputTokens*r.cacheWrite5m
	return pico + u.WebSearchRequests*t.webSearch*1000, true
}

// Runtime is the list cost of active time, in picodollars.
func (t *Table) Runtime(active time.Duration) *big.Rat {
	var runtime int64
	if t != nil {
		runtime = t.runtime
	}
	// ns × microdollars/hour × 1e6 pico/micro ÷ 3.6e12 ns/hour
	num := new(big.Int).Mul(big.NewInt(int64(active)), big.NewInt(runtime))
	return new(big.Rat).SetFrac(num, big.NewInt(3_600_000))
}

// Total is the exact list cost of tokenPico picodollars of calls and
// active time of runtime, in picodollars.
func (t *Table) Total(tokenPico int64, active time.Duration) *big.Rat {
	r := t.Runtime(active)
	return r.Add(r, new(big.Rat).SetInt64(tokenPico))
}

// Cents rounds an amount in picodollars to the nearest cent (half up).
func Cents(pico *big.Rat) int64 {
	c := new(big.Rat).Quo(pico, big.NewRat(PicoPerCent, 1))
	c.Add(c, big.NewRat(1, 2))
	q := new(big.Int).Quo(c.Num(), c.Denom()) // floor for non-negative amounts
	return q.Int64()
}

// CentsAmount is an amount of cents in picodollars.
func CentsAmount(cents int64) *big.Rat {
	return new(big.Rat).SetInt(new(big.Int).Mul(big.NewInt(cents), big.NewInt(PicoPerCent)))
}
