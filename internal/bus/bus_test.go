package bus

import "testing"

func TestPublishWakesSubscribersAndMerges(t *testing.T) {
	b := New()
	s1, s2 := b.Subscribe("a"), b.Subscribe("a")
	other := b.Subscribe("b")
	b.Publish("a")
	b.Publish("a") // merged with the pending one
	for _, s := range []*Sub{s1, s2} {
		select {
		case <-s.C:
		default:
			t.Fatal("subscriber not woken")
		}
		select {
		case <-s.C:
			t.Fatal("wake-ups not merged")
		default:
		}
	}
	select {
	case <-other.C:
		t.Fatal("other key woken")
	default:
	}
	s1.Close()
	s2.Close()
	other.Close()
	if len(b.subs) != 0 {
		t.Fatalf("subscriptions leak: %v", b.subs)
	}
}
