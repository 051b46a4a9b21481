package scripted

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/model"
)

// The scripted grader answers the requests of an outcome's grader
// (model.PurposeGrader). It reads directives from the outcome's rubric
// (the <rubric> section of the grader's prompt):
//
//	@grade needs_revision The summary has no title.
//	@grade satisfied The summary has a title now.
//	                           the verdict of each iteration, in order (the
//	                           last one repeats); result and explanation
//	@grade-raw not a verdict   reply with this text instead (an iteration's
//	                           answer, like @grade)
//	@grade-sleep 2s            wait before answering (honours cancellation)
//
// A rubric without @grade is satisfied.

var (
	rubricSection    = regexp.MustCompile(`(?s)<rubric>\n(.*?)\n</rubric>`)
	iterationSection = regexp.MustCompile(`<iteration>(\d+)</iteration>`)
)

// grade answers a grader request.
func (p *Provider) grade(ctx context.Context, req *model.Request) (*model.Response, error) {
	prompt := ""
	if len(req.Messages) > 0 {
		for _, b := range req.Messages[0].Content {
			if b.Type == model.BlockText {
				prompt += b.Text
			}
		}
	}
	rubric := ""
	if m := rubricSection.FindStringSubmatch(prompt); m != nil {
		rubric = m[1]
	}
	iteration := 0
	if m := iterationSection.FindStringSubmatch(prompt); m != nil {
		iteration, _ = strconv.Atoi(m[1])
	}
	var answers []string
	var sleep time.Duration
	for _, line := range strings.Split(rubric, "\n") {
		word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest = strings.TrimSpace(rest)
		switch word {
		case "@grade":
			result, explanation, _ := strings.Cut(rest, " ")
			v, _ := json.Marshal(map[string]string{"result": result, "explanation": strings.TrimSpace(explanation)})
			answers = append(answers, string(v))
		case "@grade-raw":
			answers = append(answers, rest)
		case "@grade-sleep":
			d, err := time.ParseDuration(rest)
			if err != nil || d < 0 {
				return nil, &model.Error{Kind: model.KindInvalid, StatusCode: http.StatusBadRequest, Message: "@grade-sleep: want a duration such as 2s, got " + strconv.Quote(rest)}
			}
			sleep = d
		}
	}
	if err := wait(ctx, sleep); err != nil {
		return nil, err
	}
	text := `{"result":"satisfied","explanation":"The rubric has no @grade directive: the scripted grader is satisfied."}`
	if len(answers) > 0 {
		text = answers[min(iteration, len(answers)-1)]
	}
	resp := &model.Response{StopReason: model.StopEndTurn, Content: []model.Block{{Type: model.BlockText, Text: text}}}
	resp.Usage = model.Usage{InputTokens: int64(tokens(req)), OutputTokens: int64(outTokens(resp))}
	return resp, nil
}
