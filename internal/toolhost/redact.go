package toolhost

import (
	"encoding/base64"
	"strings"

	ma "github.com/reinsdev/reins/managedagents"
)

// Redaction is a second layer under substitution at egress: in a sandbox
// a credential's variable holds a placeholder, and the value reaches tool
// output only if something outside echoes it back (or with
// --sandbox=none, where the value is injected). It replaces the value and
// the forms a tool most easily prints it in: reversed and base64 (at each
// of the three byte alignments, standard and URL alphabets). It cannot
// promise more: any reversible transformation defeats it.

// minRedact is the shortest value redacted; minDerived the shortest whose
// derived forms are (shorter ones match too much ordinary output).
const (
	minRedact  = 4
	minDerived = 8
)

// redact replaces injected credential values in a tool's output: secrets
// never reach the event log in the forms above, whatever the tool printed.
func redact(content []ma.ContentBlock, secrets []secret) {
	for i := range content {
		for _, s := range secrets {
			content[i].Text = redactOne(content[i].Text, s)
		}
	}
}

func redactOne(text string, s secret) string {
	if len(s.value) < minRedact {
		return text
	}
	mark := "[redacted credential " + s.name + "]"
	text = strings.ReplaceAll(text, s.value, mark)
	if len(s.value) < minDerived {
		return text
	}
	for _, form := range derivedForms(s.value) {
		text = strings.ReplaceAll(text, form, mark)
	}
	return text
}

// derivedForms are the reversed value and the base64 runs that encode the
// value wherever it sits in a longer string.
func derivedForms(v string) []string {
	forms := []string{reverse(v)}
	for k := 0; k < 3; k++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, k), v...))
		// Only the characters whose six bits all come from v.
		from, to := (8*k+5)/6, 8*(k+len(v))/6
		run := enc[from:to]
		forms = append(forms, run, strings.NewReplacer("+", "-", "/", "_").Replace(run))
	}
	return forms
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}
