package cli

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// fakeStream replays recorded frames.
type fakeStream struct {
	frames []string
	i      int
	cur    anthropic.BetaManagedAgentsStreamSessionEventsUnion
	err    error
}

func (s *fakeStream) Next() bool {
	if s.i >= len(s.frames) {
		return false
	}
	s.cur = anthropic.BetaManagedAgentsStreamSessionEventsUnion{}
	if err := json.Unmarshal([]byte(s.frames[s.i]), &s.cur); err != nil {
		s.err = err
		return false
	}
	s.i++
	return true
}

func (s *fakeStream) Current() anthropic.BetaManagedAgentsStreamSessionEventsUnion { return s.cur }
func (s *fakeStream) Err() error                                                   { return s.err }

func newTestFollower(untilIdle bool) (*follower, *strings.Builder) {
	var out strings.Builder
	return &follower{c: &apiClient{}, sessionID: "sesn_t", r: newRenderer(false, false),
		con: newConsole(&out, false, false), untilIdle: untilIdle}, &out
}

func TestFollowWaitsForItsOwnTurn(t *testing.T) {
	f, out := newTestFollower(true)
	f.await = "sevt_me"
	s := &fakeStream{frames: []string{
		`{"type":"agent.message","id":"sevt_a","processed_at":"t","content":[{"type":"text","text":"earlier turn"}]}`,
		`{"type":"session.status_idle","id":"sevt_i1","processed_at":"t","stop_reason":{"type":"end_turn"}}`,
		`{"type":"session.status_running","id":"sevt_r","processed_at":"t"}`,
		`{"type":"user.message","id":"sevt_me","processed_at":"t","content":[{"type":"text","text":"mine"}]}`,
		`{"type":"agent.message","id":"sevt_b","processed_at":"t","content":[{"type":"text","text":"my answer"}]}`,
		`{"type":"session.status_idle","id":"sevt_i2","processed_at":"t","stop_reason":{"type":"end_turn"}}`,
		`{"type":"agent.message","id":"sevt_c","processed_at":"t","content":[{"type":"text","text":"not read"}]}`,
	}}
	if err := f.follow(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "earlier turn\nmy answer\n" {
		t.Errorf("output %q", got)
	}
}

func TestFollowOutcomes(t *testing.T) {
	idle := func(reason string) string {
		return `{"type":"session.status_idle","id":"sevt_i","processed_at":"t","stop_reason":{"type":"` + reason + `"}}`
	}
	tests := []struct {
		name      string
		untilIdle bool
		frames    []string
		wantCode  int // -1: a plain error, 0: nil
		wantRead  int
	}{
		{"end turn", true, []string{idle("end_turn"), idle("end_turn")}, 0, 1},
		{"exhausted", true, []string{idle("retries_exhausted")}, 1, 1},
		{"terminated", true, []string{`{"type":"session.status_terminated","id":"sevt_t","processed_at":"t"}`}, 1, 1},
		{"deleted", false, []string{`{"type":"session.deleted","id":"sevt_d","processed_at":"t"}`}, 1, 1},
		{"tail goes on after a turn", false, []string{idle("end_turn"), idle("retries_exhausted")}, -1, 2},
		{"passive requires action", true, []string{
			`{"type":"agent.custom_tool_use","id":"sevt_cu","processed_at":"t","name":"lookup","input":{}}`,
			`{"type":"session.status_idle","id":"sevt_i","processed_at":"t","stop_reason":{"type":"requires_action","event_ids":["sevt_cu"]}}`,
		}, exitNeedsInput, 2},
		{"stream ends early", true, []string{`{"type":"session.status_running","id":"sevt_r","processed_at":"t"}`}, -1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := newTestFollower(tt.untilIdle)
			s := &fakeStream{frames: tt.frames}
			err := f.follow(context.Background(), s)
			switch {
			case tt.wantCode == 0 && err != nil:
				t.Errorf("err = %v", err)
			case tt.wantCode == -1:
				var ee *exitError
				if err == nil || errors.As(err, &ee) {
					t.Errorf("err = %v, want a plain error", err)
				}
			case tt.wantCode > 0 && exitCode(err) != tt.wantCode:
				t.Errorf("exit %d (%v), want %d", exitCode(err), err, tt.wantCode)
			}
			if s.i != tt.wantRead {
				t.Errorf("read %d frames, want %d", s.i, tt.wantRead)
			}
		})
	}
}

func TestFollowNeedsInputWithoutTerminal(t *testing.T) {
	f, _ := newTestFollower(true)
	f.answers = &answers{}
	s := &fakeStream{frames: []string{
		`{"type":"agent.tool_use","id":"sevt_tu","processed_at":"t","name":"bash","input":{},"evaluated_permission":"ask"}`,
		`{"type":"session.status_idle","id":"sevt_i","processed_at":"t","stop_reason":{"type":"requires_action","event_ids":["sevt_tu"]}}`,
	}}
	err := f.follow(context.Background(), s)
	if exitCode(err) != exitNeedsInput {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"approval of bash", "sevt_tu", "reins sessions send sesn_t", "--auto-approve"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

func TestFollowJSONLines(t *testing.T) {
	f, _ := newTestFollower(true)
	var raw strings.Builder
	f.raw = &raw
	frames := []string{
		`{"type":"event_delta","event_id":"sevt_m","delta":{"type":"content_delta","index":0,"content":{"type":"text","text":"hi"}}}`,
		`{"type":"session.status_idle","id":"sevt_i","processed_at":"t","stop_reason":{"type":"end_turn"}}`,
	}
	if err := f.follow(context.Background(), &fakeStream{frames: frames}); err != nil {
		t.Fatal(err)
	}
	if got := raw.String(); got != strings.Join(frames, "\n")+"\n" {
		t.Errorf("got %q", got)
	}
}
