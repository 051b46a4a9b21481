package backoff

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestCeiling(t *testing.T) {
	p := Policy{Base: time.Second, Max: 30 * time.Second}
	for n, want := range map[int]time.Duration{
		0: time.Second, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		5: 16 * time.Second, 6: 30 * time.Second, 1000: 30 * time.Second,
	} {
		if got := p.Ceiling(n); got != want {
			t.Errorf("Ceiling(%d) = %s, want %s", n, got, want)
		}
	}
	huge := Policy{Base: time.Duration(1) << 61, Max: time.Duration(1<<63 - 1)}
	if got := huge.Ceiling(10); got != huge.Max {
		t.Errorf("Ceiling near overflow = %d, want Max %d", got, huge.Max)
	}
	if got := (Policy{Base: time.Second}).Ceiling(5); got != time.Second {
		t.Errorf("Ceiling with Max < Base = %s, want Base", got)
	}
}

// TestDelayFullJitter checks that delays fill the whole window [0, ceiling]:
// a quarter of them fall below a quarter of the ceiling.
func TestDelayFullJitter(t *testing.T) {
	p := Policy{Base: time.Second, Max: time.Minute, Rand: rand.New(rand.NewPCG(1, 2))}
	const samples = 4000
	for _, n := range []int{1, 3, 10} {
		c := p.Ceiling(n)
		low := 0
		for range samples {
			d := p.Delay(n)
			if d < 0 || d > c {
				t.Fatalf("Delay(%d) = %s, outside [0, %s]", n, d, c)
			}
			if d < c/4 {
				low++
			}
		}
		if low < samples/5 || low > samples*3/10 {
			t.Errorf("attempt %d: %d of %d delays below a quarter of the ceiling, want about a quarter", n, low, samples)
		}
	}
}

func TestDelayDeterministic(t *testing.T) {
	a := Policy{Base: time.Second, Max: time.Minute, Rand: rand.New(rand.NewPCG(7, 7))}
	b := Policy{Base: time.Second, Max: time.Minute, Rand: rand.New(rand.NewPCG(7, 7))}
	for n := 1; n < 10; n++ {
		if x, y := a.Delay(n), b.Delay(n); x != y {
			t.Fatalf("same seed, attempt %d: %s != %s", n, x, y)
		}
	}
}
