package outcomes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	ma "github.com/reinsdev/reins/managedagents"
)

// Limits of a user.define_outcome.
const (
	// DefaultMaxIterations is max_iterations when it is absent or null.
	DefaultMaxIterations = 3
	// MaxIterations bounds max_iterations.
	MaxIterations = 20
	// MaxRubric bounds a rubric's text, in characters.
	MaxRubric = 262144
	// MaxExplanation bounds, in bytes, the explanation a verdict keeps.
	MaxExplanation = 16 << 10
)

// Verdict is what the grader answers: a result the grader may give
// (satisfied, needs_revision or failed) and why.
type Verdict struct {
	Result      string `json:"result"`
	Explanation string `json:"explanation"`
}

// ParseVerdict reads a grader's reply. The reply must be one JSON object
// {"result": …, "explanation": …} and nothing else (white space and one
// enclosing ``` or ```json fence aside); result is satisfied,
// needs_revision or failed, and explanation is not empty. An explanation
// longer than MaxExplanation bytes is cut.
func ParseVerdict(reply string) (Verdict, error) {
	text := strings.TrimSpace(reply)
	if body, ok := strings.CutPrefix(text, "```"); ok {
		body, ok = strings.CutSuffix(body, "```")
		if !ok {
			return Verdict{}, errors.New("the reply opens a code fence it does not close")
		}
		body = strings.TrimPrefix(body, "json")
		text = strings.TrimSpace(body)
	}
	if text == "" {
		return Verdict{}, errors.New("the reply is empty")
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var v Verdict
	if err := dec.Decode(&v); err != nil {
		return Verdict{}, fmt.Errorf("the reply is not the verdict object: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Verdict{}, errors.New("the reply has more than the verdict object")
	}
	switch v.Result {
	case ma.OutcomeSatisfied, ma.OutcomeNeedsRevision, ma.OutcomeFailed:
	default:
		return Verdict{}, fmt.Errorf("result must be satisfied, needs_revision or failed; got %q", v.Result)
	}
	v.Explanation = strings.TrimSpace(v.Explanation)
	if v.Explanation == "" {
		return Verdict{}, errors.New("explanation must not be empty")
	}
	v.Explanation = Cut(v.Explanation, MaxExplanation)
	return v, nil
}

// Cut returns s cut to at most n bytes (a rune the cut splits is
// dropped), marked "…" when cut.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
