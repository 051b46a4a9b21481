package deployments

import (
	"testing"
	"time"
)

func TestParseSchedule(t *testing.T) {
	for _, bad := range [][2]string{
		{"0 * * * * *", "UTC"}, {"@daily", "UTC"}, {"0 0 L * *", "UTC"}, {"0 0 * * 1#2", "UTC"},
		{"0 0 ? * 1", "UTC"}, {"0 0 15W * *", "UTC"}, {"0 0 * * *", ""}, {"0 0 * * *", "Mars/Olympus"},
		{"TZ=UTC 0 0 * * *", "UTC"}, {"0 0 * * 8", "UTC"}, {"61 * * * *", "UTC"},
	} {
		if _, err := ParseSchedule(bad[0], bad[1]); err == nil {
			t.Errorf("ParseSchedule(%q, %q) accepted", bad[0], bad[1])
		}
	}
	// 7 and 0 are both Sunday; 5-7 is Friday to Sunday.
	from := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC) // a Monday
	for expr, want := range map[string]time.Time{
		"0 9 * * 7":   time.Date(2026, 12, 13, 9, 0, 0, 0, time.UTC),
		"0 9 * * 0":   time.Date(2026, 12, 13, 9, 0, 0, 0, time.UTC),
		"0 9 * * 6-7": time.Date(2026, 12, 12, 9, 0, 0, 0, time.UTC),
		"0 9 * * SUN": time.Date(2026, 12, 13, 9, 0, 0, 0, time.UTC),
	} {
		s, err := ParseSchedule(expr, "UTC")
		if err != nil {
			t.Fatalf("ParseSchedule(%q): %v", expr, err)
		}
		if got := s.Next(from); !got.Equal(want) {
			t.Errorf("%q: next = %v, want %v", expr, got, want)
		}
	}
	// Wall-clock time in the zone: 09:00 in Paris is 08:00 UTC in winter.
	s, err := ParseSchedule("0 9 * * *", "Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Next(from).UTC(), time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("Paris 09:00 = %v, want %v", got, want)
	}
}
