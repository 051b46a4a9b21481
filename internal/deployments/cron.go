package deployments

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// parser reads the five POSIX fields (minute, hour, day of month, month,
// day of week): no seconds, no descriptors such as @daily.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// Schedule is a parsed cron schedule in its time zone.
type Schedule struct {
	s cron.Schedule
}

// Next returns the first instant the schedule fires strictly after t.
func (s Schedule) Next(t time.Time) time.Time { return s.s.Next(t) }

// Upcoming returns the next n instants after t, in UTC.
func (s Schedule) Upcoming(t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for range n {
		t = s.s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t.UTC())
	}
	return out
}

// ParseSchedule parses a 5-field POSIX cron expression (dow 0 to 7, 0 and
// 7 both Sunday; no L, W, # or ?; no seconds, years or @ descriptors) in
// the IANA time zone tz, matched against wall-clock time there.
func ParseSchedule(expr, tz string) (Schedule, error) {
	if tz == "" {
		return Schedule{}, fmt.Errorf("timezone: required (an IANA time zone such as Europe/Paris or UTC)")
	}
	if _, err := time.LoadLocation(tz); err != nil || tz == "Local" {
		return Schedule{}, fmt.Errorf("timezone: %q is not an IANA time zone", tz)
	}
	if strings.ContainsAny(expr, "LW#?@") || strings.Contains(expr, "TZ=") {
		return Schedule{}, fmt.Errorf("expression: %q: only the POSIX cron syntax is accepted (numbers, names, *, ranges, lists and steps); L, W, #, ?, @ descriptors and TZ= are not", expr)
	}
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return Schedule{}, fmt.Errorf("expression: %q has %d fields; a schedule has 5 (minute hour day-of-month month day-of-week), without seconds or years", expr, len(fields))
	}
	dow, err := normalizeDow(fields[4])
	if err != nil {
		return Schedule{}, fmt.Errorf("expression: %w", err)
	}
	fields[4] = dow
	s, err := parser.Parse("CRON_TZ=" + tz + " " + strings.Join(fields, " "))
	if err != nil {
		return Schedule{}, fmt.Errorf("expression: %q: %w", expr, err)
	}
	return Schedule{s}, nil
}

// normalizeDow rewrites a day-of-week field that names 7 (Sunday, as 0
// does) into the list of days the parser reads as 0 to 6; other fields
// are returned as they are.
func normalizeDow(f string) (string, error) {
	if !strings.Contains(f, "7") || strings.ContainsAny(f, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") {
		return f, nil
	}
	days := map[int]bool{}
	for _, part := range strings.Split(f, ",") {
		base, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 {
				return "", fmt.Errorf("day of week %q: bad step %q", f, stepText)
			}
			step = n
		}
		lo, hi := 0, 7
		if base != "*" {
			a, b, isRange := strings.Cut(base, "-")
			var err error
			if lo, err = strconv.Atoi(a); err != nil {
				return "", fmt.Errorf("day of week %q: %q is not a day", f, a)
			}
			hi = lo
			if isRange {
				if hi, err = strconv.Atoi(b); err != nil {
					return "", fmt.Errorf("day of week %q: %q is not a day", f, b)
				}
			} else if hasStep {
				hi = 7
			}
		}
		if lo < 0 || hi > 7 || lo > hi {
			return "", fmt.Errorf("day of week %q: days are 0 to 7", f)
		}
		for d := lo; d <= hi; d += step {
			days[d%7] = true
		}
	}
	var list []string
	for d := range 7 {
		if days[d] {
			list = append(list, strconv.Itoa(d))
		}
	}
	return strings.Join(list, ","), nil
}
