package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/outcomes"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// OutputFiles lists and reads the files a session keeps from its outputs
// directory (Files of the session's scope); a store.Store is one.
type OutputFiles interface {
	ListFiles(ctx context.Context, q store.FileQuery) ([]store.Item[store.File], error)
	ReadFileChunk(ctx context.Context, id string, n int) ([]byte, error)
}

// Bounds of what the grader is shown of a session's outputs.
const (
	// graderMaxFiles bounds the output files the grader's prompt lists.
	graderMaxFiles = 100
	// graderFileBytes bounds the text shown of one output file.
	graderFileBytes = 16 << 10
	// graderOutputBytes bounds the text shown of all output files.
	graderOutputBytes = 64 << 10
	// graderAnswerBytes bounds the agent's final answer as shown.
	graderAnswerBytes = 64 << 10
)

// GraderSystem is the system prompt of the grader. The user message that
// follows holds the outcome's description, its rubric, the agent's final
// answer and the session's output files (graderPrompt).
const GraderSystem = `You are the grader of an outcome. An agent was given a task (the outcome's description) and worked on it in its own session; you did not see that work and cannot use tools. Judge what it delivered — its final answer and the files under its outputs directory, as shown to you — against the rubric, strictly and only against the rubric.

Answer with one JSON object and nothing else:
{"result": "satisfied" | "needs_revision" | "failed", "explanation": "..."}

- "satisfied": every criterion of the rubric is met. The explanation says why.
- "needs_revision": some criterion is not met and the agent can fix it. The explanation names each unmet criterion and what to change; it is sent to the agent as its next instruction.
- "failed": the rubric cannot apply to this task or its deliverables (for example the description and the rubric contradict each other), so no revision can satisfy it. The explanation says why.`

// graderPrompt is the grader's user message for one evaluation.
func graderPrompt(a *outcomes.Active, rubric string, outputs string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<outcome_id>%s</outcome_id>\n<iteration>%d</iteration>\n<max_iterations>%d</max_iterations>\n\n",
		a.Define.OutcomeID, a.Iteration, a.MaxIterations())
	fmt.Fprintf(&b, "<description>\n%s\n</description>\n\n<rubric>\n%s\n</rubric>\n\n", a.Define.Description, rubric)
	answer := strings.TrimSpace(contentText(a.Answer))
	if answer == "" {
		answer = "(the agent ended its turn without a message)"
	}
	fmt.Fprintf(&b, "<final_answer>\n%s\n</final_answer>\n\n", outcomes.Cut(answer, graderAnswerBytes))
	fmt.Fprintf(&b, "<outputs>\n%s</outputs>\n\nAnswer with the verdict object only.", outputs)
	return b.String()
}

// rubricText returns the text of an outcome's rubric (file rubrics are
// resolved to text when the outcome is received).
func rubricText(ev ma.Event) string {
	var r struct {
		Type    string `json:"type"`
		Content string `json:"content"`
		FileID  string `json:"file_id"`
	}
	if json.Unmarshal(ev.Rubric, &r) != nil {
		return ""
	}
	if r.Type == "file" {
		return fmt.Sprintf("(the rubric is the file %s, which could not be read)", r.FileID)
	}
	return r.Content
}

// contentText joins the text of content blocks.
func contentText(content []ma.ContentBlock) string {
	var parts []string
	for _, c := range content {
		if c.Type == "text" && c.Text != "" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

// describeOutputs lists a session's output files, newest version of each
// name, and shows the text of the small text files within a byte budget.
func describeOutputs(ctx context.Context, files OutputFiles, sessionID string) (string, error) {
	if files == nil {
		return "(this server keeps no outputs)\n", nil
	}
	items, err := files.ListFiles(ctx, store.FileQuery{ScopeID: sessionID, ListQuery: store.ListQuery{Desc: true, Limit: 4 * graderMaxFiles}})
	if err != nil {
		return "", fmt.Errorf("list the session's outputs: %w", err)
	}
	var b strings.Builder
	seen, budget, listed := map[string]bool{}, graderOutputBytes, 0
	for _, it := range items {
		f := it.Value
		if seen[f.Filename] {
			continue // an older version
		}
		seen[f.Filename] = true
		if listed++; listed > graderMaxFiles {
			b.WriteString("(more files are not listed)\n")
			break
		}
		text, shown := "", false
		if isText(f.MimeType) && f.SizeBytes <= graderFileBytes && f.SizeBytes <= int64(budget) {
			if text, err = readText(ctx, files, f); err != nil {
				return "", err
			}
			shown = text != "" || f.SizeBytes == 0
		}
		fmt.Fprintf(&b, "<file name=%q mime_type=%q size_bytes=\"%d\">", f.Filename, f.MimeType, f.SizeBytes)
		if shown {
			budget -= len(text)
			fmt.Fprintf(&b, "\n%s\n</file>\n", text)
		} else {
			b.WriteString("(content not shown)</file>\n")
		}
	}
	if listed == 0 {
		b.WriteString("(no files)\n")
	}
	return b.String(), nil
}

func isText(mt string) bool {
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "application/xml"
}

// readText reads a small file's content; "" when it is not UTF-8.
func readText(ctx context.Context, files OutputFiles, f store.File) (string, error) {
	data := make([]byte, 0, f.SizeBytes)
	for n := 0; int64(len(data)) < f.SizeBytes; n++ {
		chunk, err := files.ReadFileChunk(ctx, f.ID, n)
		if err != nil {
			return "", fmt.Errorf("read output %s: %w", f.ID, err)
		}
		data = append(data, chunk...)
	}
	if !utf8.Valid(data) {
		return "", nil
	}
	return string(data), nil
}

// graderRequest is the request of one grader call; retry, if set, is
// the grader's previous reply and why it was not a verdict.
func graderRequest(modelID, sessionID, prompt string, retry *graderRetry) *model.Request {
	req := &model.Request{Model: modelID, System: GraderSystem, SessionID: sessionID, Purpose: model.PurposeGrader,
		Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockText, Text: prompt}}}}}
	if retry != nil {
		req.Messages = append(req.Messages,
			model.Message{Role: model.RoleAssistant, Content: []model.Block{{Type: model.BlockText, Text: retry.reply}}},
			model.Message{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockText,
				Text: "That reply is not a verdict (" + retry.err.Error() + "). Answer with the JSON object only: {\"result\": …, \"explanation\": …}."}}})
	}
	return req
}

// graderRetry is a grader reply that was not a verdict.
type graderRetry struct {
	reply string
	err   error
}
