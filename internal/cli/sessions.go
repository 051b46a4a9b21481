package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/spf13/cobra"

	ma "github.com/reinsdev/reins/managedagents"
)

func newSessionsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sessions",
		Aliases: []string{"session"},
		Short:   "Run agents: create sessions, talk to them, follow their events",
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(sessionsCreate(cf), sessionsGet(cf), sessionsList(cf), sessionsArchive(cf), sessionsDelete(cf),
		sessionsSend(cf), sessionsEvents(cf), sessionsTail(cf), sessionsRun(cf))
	return cmd
}

// sessionFields are the flags that build a session create body.
type sessionFields struct {
	file         string
	agent        string
	agentVersion int64
	environment  string
	title        string
	metadata     []string
}

func (f *sessionFields) register(cmd *cobra.Command, withFile bool) {
	fl := cmd.Flags()
	if withFile {
		fl.StringVar(&f.file, "file", "", "a JSON request body (- for stdin); the other flags override its fields")
	}
	fl.StringVar(&f.agent, "agent", "", "agent id")
	fl.Int64Var(&f.agentVersion, "agent-version", 0, "pin this agent version (default: the latest)")
	fl.StringVar(&f.environment, "environment", "", "environment id (default: the first cloud environment)")
	fl.StringVar(&f.title, "title", "", "session title")
	fl.StringArrayVar(&f.metadata, "metadata", nil, "metadata KEY=VALUE (repeatable)")
}

// body builds the create body. The environment defaults to the first
// cloud environment when neither the flags nor the file name one.
func (f *sessionFields) body(ctx context.Context, cmd *cobra.Command, c *apiClient) ([]byte, error) {
	body := map[string]any{}
	if f.file != "" {
		var err error
		if body, err = readBodyFile(f.file, cmd.InOrStdin()); err != nil {
			return nil, err
		}
	}
	if f.agent != "" {
		if f.agentVersion > 0 {
			body["agent"] = map[string]any{"type": "agent", "id": f.agent, "version": f.agentVersion}
		} else {
			body["agent"] = f.agent
		}
	}
	if body["agent"] == nil {
		return nil, errors.New("--agent is required (see `reins agents list`)")
	}
	if f.environment != "" {
		body["environment_id"] = f.environment
	}
	if body["environment_id"] == nil {
		id, err := firstCloudEnvironment(ctx, c)
		if err != nil {
			return nil, err
		}
		body["environment_id"] = id
	}
	if f.title != "" {
		body["title"] = f.title
	}
	md, err := parsePairs("metadata", f.metadata)
	if err != nil {
		return nil, err
	}
	if md != nil {
		merged, _ := body["metadata"].(map[string]any)
		if merged == nil {
			merged = map[string]any{}
		}
		for k, v := range md {
			merged[k] = v
		}
		body["metadata"] = merged
	}
	return json.Marshal(body)
}

// firstCloudEnvironment finds the first cloud environment that is not
// archived.
func firstCloudEnvironment(ctx context.Context, c *apiClient) (string, error) {
	pager := c.Beta.Environments.ListAutoPaging(ctx, anthropic.BetaEnvironmentListParams{Limit: anthropic.Int(100)})
	for pager.Next() {
		e := pager.Current()
		env, err := decodeRaw[ma.Environment](e)
		if err != nil {
			return "", err
		}
		if env.Config.Type == ma.EnvCloud && env.ArchivedAt == nil {
			return env.ID, nil
		}
	}
	if err := pager.Err(); err != nil {
		return "", c.explain(err)
	}
	return "", errors.New("no cloud environment to run in: create one with `reins environments create --name NAME`, or pass --environment")
}

func createSession(ctx context.Context, cmd *cobra.Command, c *apiClient, f *sessionFields) (*anthropic.BetaManagedAgentsSession, error) {
	body, err := f.body(ctx, cmd, c)
	if err != nil {
		return nil, err
	}
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{}, option.WithRequestBody("application/json", body))
	if err != nil {
		return nil, c.explain(err)
	}
	return s, nil
}

func sessionsCreate(cf *clientFlags) *cobra.Command {
	var f sessionFields
	cmd := &cobra.Command{
		Use:   "create --agent AGENT_ID [flags]",
		Short: "Create a session",
		Example: `  reins sessions create --agent agent_01… --title "try it"
  reins sessions create --file session.json`,
		Args: cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			s, err := createSession(cmd.Context(), cmd, c, &f)
			if err != nil {
				return err
			}
			return printSession(cmd.OutOrStdout(), c.output, s)
		}),
	}
	f.register(cmd, true)
	return cmd
}

func sessionsGet(cf *clientFlags) *cobra.Command {
	return byID(cf, "get SESSION_ID", "Show a session", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsSession, error) {
		return c.Beta.Sessions.Get(ctx, id, anthropic.BetaSessionGetParams{})
	}, printSession)
}

func sessionsList(cf *clientFlags) *cobra.Command {
	var lf listFlags
	var agent, order string
	var statuses []string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List sessions (newest first)",
		Args:  cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			p := anthropic.BetaSessionListParams{Statuses: statuses}
			p.Limit, p.Page, p.IncludeArchived = lf.opts()
			if agent != "" {
				p.AgentID = anthropic.String(agent)
			}
			if order != "" {
				p.Order = anthropic.BetaSessionListParamsOrder(order)
			}
			page, err := c.Beta.Sessions.List(cmd.Context(), p)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.output == outputJSON {
				return printJSON(w, page)
			}
			var sessions ma.BidirectionalPage[ma.Session]
			if err := json.Unmarshal([]byte(page.RawJSON()), &sessions); err != nil {
				return fmt.Errorf("decode response: %w", err)
			}
			t := newTable(w, "ID", "STATUS", "TITLE", "AGENT", "ENVIRONMENT", "CREATED")
			for _, s := range sessions.Data {
				t.row(s.ID, s.Status, orDash(oneLine(s.Title, 40)), s.Agent.ID+" v"+strconv.FormatInt(s.Agent.Version, 10), s.EnvironmentID, s.CreatedAt)
			}
			if err := t.flush(); err != nil {
				return err
			}
			nextPageHint(cmd.ErrOrStderr(), deref(sessions.NextPage))
			return nil
		}),
	}
	lf.register(cmd, true)
	cmd.Flags().StringVar(&agent, "agent", "", "only sessions of this agent")
	cmd.Flags().StringArrayVar(&statuses, "status", nil, "only sessions in this status: idle, running, rescheduling, terminated (repeatable)")
	cmd.Flags().StringVar(&order, "order", "", "asc or desc (default desc)")
	return cmd
}

func sessionsArchive(cf *clientFlags) *cobra.Command {
	return byID(cf, "archive SESSION_ID", "Archive a session (it becomes read-only)", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsSession, error) {
		return c.Beta.Sessions.Archive(ctx, id, anthropic.BetaSessionArchiveParams{})
	}, printSession)
}

func sessionsDelete(cf *clientFlags) *cobra.Command {
	return byID(cf, "delete SESSION_ID", "Delete a session and its history", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsDeletedSession, error) {
		return c.Beta.Sessions.Delete(ctx, id, anthropic.BetaSessionDeleteParams{})
	}, printDeleted)
}

// sendFlags build the events of `sessions send`.
type sendFlags struct {
	file        string
	interrupt   bool
	approve     []string
	deny        []string
	denyMessage string
	toolResult  string
	isError     bool
}

func (sf *sendFlags) events(cmd *cobra.Command, args []string) ([]byte, error) {
	var events []any
	if sf.file != "" {
		body, err := readEventsFile(sf.file, cmd.InOrStdin())
		if err != nil {
			return nil, err
		}
		events = append(events, body...)
	}
	text := strings.Join(args, " ")
	textContent := []any{map[string]any{"type": "text", "text": text}}
	switch {
	case sf.toolResult != "":
		ev := map[string]any{"type": ma.EventUserCustomToolResult, "custom_tool_use_id": sf.toolResult, "is_error": sf.isError}
		if text != "" {
			ev["content"] = textContent
		}
		events = append(events, ev)
	case text != "":
		events = append(events, map[string]any{"type": ma.EventUserMessage, "content": textContent})
	}
	for _, id := range sf.approve {
		events = append(events, map[string]any{"type": ma.EventUserToolConfirmation, "tool_use_id": id, "result": "allow"})
	}
	for _, id := range sf.deny {
		ev := map[string]any{"type": ma.EventUserToolConfirmation, "tool_use_id": id, "result": "deny"}
		if sf.denyMessage != "" {
			ev["deny_message"] = sf.denyMessage
		}
		events = append(events, ev)
	}
	if sf.interrupt {
		events = append(events, map[string]any{"type": ma.EventUserInterrupt})
	}
	if len(events) == 0 {
		return nil, errors.New("nothing to send: give a message, or --interrupt, --approve, --deny, --tool-result or --file")
	}
	return json.Marshal(map[string]any{"events": events})
}

// readEventsFile reads {"events":[…]} or a bare array of events.
func readEventsFile(path string, stdin io.Reader) ([]any, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	var arr []any
	if json.Unmarshal(b, &arr) == nil {
		return arr, nil
	}
	var obj struct {
		Events []any `json:"events"`
	}
	if err := json.Unmarshal(b, &obj); err != nil || obj.Events == nil {
		return nil, fmt.Errorf("--file %s: want {\"events\":[…]} or a JSON array of events", path)
	}
	return obj.Events, nil
}

func sessionsSend(cf *clientFlags) *cobra.Command {
	var sf sendFlags
	cmd := &cobra.Command{
		Use:   "send SESSION_ID [MESSAGE...]",
		Short: "Send events to a session: a message, tool confirmations, a custom tool result, an interrupt",
		Example: `  reins sessions send sesn_01… "What changed since yesterday?"
  reins sessions send sesn_01… --approve sevt_01…
  reins sessions send sesn_01… --deny sevt_01… --deny-message "not on prod"
  reins sessions send sesn_01… --tool-result sevt_01… '{"temperature": 21}'
  reins sessions send sesn_01… --interrupt`,
		Args: cobra.MinimumNArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			body, err := sf.events(cmd, args[1:])
			if err != nil {
				return err
			}
			res, err := c.Beta.Sessions.Events.Send(cmd.Context(), args[0], anthropic.BetaSessionEventSendParams{}, option.WithRequestBody("application/json", body))
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.output == outputJSON {
				return printJSON(w, res)
			}
			var page ma.Page[ma.Event]
			if err := json.Unmarshal([]byte(res.RawJSON()), &page); err != nil {
				return fmt.Errorf("decode response: %w", err)
			}
			for _, ev := range page.Data {
				state := "queued"
				if ev.ProcessedAt != nil {
					state = "processed"
				}
				fmt.Fprintf(w, "sent %s %s (%s)\n", ev.Type, ev.ID, state)
			}
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&sf.file, "file", "", `events as JSON: {"events":[…]} or […] (- for stdin)`)
	fl.BoolVar(&sf.interrupt, "interrupt", false, "interrupt the running turn")
	fl.StringArrayVar(&sf.approve, "approve", nil, "allow the tool use with this event id (repeatable)")
	fl.StringArrayVar(&sf.deny, "deny", nil, "deny the tool use with this event id (repeatable)")
	fl.StringVar(&sf.denyMessage, "deny-message", "", "the reason given to the model for --deny")
	fl.StringVar(&sf.toolResult, "tool-result", "", "answer the custom tool use with this event id; the message is the result")
	fl.BoolVar(&sf.isError, "is-error", false, "mark the --tool-result as an error")
	return cmd
}

func sessionsEvents(cf *clientFlags) *cobra.Command {
	var lf listFlags
	var order string
	var types []string
	cmd := &cobra.Command{
		Use:   "events SESSION_ID",
		Short: "List a session's events (oldest first)",
		Args:  cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			p := anthropic.BetaSessionEventListParams{}
			p.Limit, p.Page, _ = lf.opts()
			if order != "" {
				p.Order = anthropic.BetaSessionEventListParamsOrder(order)
			}
			for _, t := range types {
				p.Types = append(p.Types, anthropic.BetaManagedAgentsSessionEventType(t))
			}
			page, err := c.Beta.Sessions.Events.List(cmd.Context(), args[0], p)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.output == outputJSON {
				return printJSON(w, page)
			}
			var events ma.Page[ma.Event]
			if err := json.Unmarshal([]byte(page.RawJSON()), &events); err != nil {
				return fmt.Errorf("decode response: %w", err)
			}
			t := newTable(w, "PROCESSED", "TYPE", "ID", "SUMMARY")
			for _, ev := range events.Data {
				t.row(orDash(deref(ev.ProcessedAt)), ev.Type, ev.ID, orDash(eventSummary(ev)))
			}
			if err := t.flush(); err != nil {
				return err
			}
			nextPageHint(cmd.ErrOrStderr(), deref(events.NextPage))
			return nil
		}),
	}
	lf.register(cmd, false)
	cmd.Flags().StringVar(&order, "order", "", "asc or desc (default asc)")
	cmd.Flags().StringArrayVar(&types, "type", nil, "only events of this type (repeatable)")
	return cmd
}

// eventSummary is the SUMMARY cell of an events table.
func eventSummary(ev ma.Event) string {
	var s string
	switch {
	case ev.Error != nil:
		s = ev.Error.Type + " (" + ev.Error.RetryStatus.Type + "): " + ev.Error.Message
	case ev.StopReason != nil:
		s = ev.StopReason.Type
		if len(ev.StopReason.EventIDs) > 0 {
			s += " " + strings.Join(ev.StopReason.EventIDs, ",")
		}
	case ev.Name != "":
		s = ev.Name + " " + string(ev.Input)
		if ev.EvaluatedPermission != "" {
			s += " [" + ev.EvaluatedPermission + "]"
		}
	case ev.Result != "":
		s = ev.Result + " " + ev.ToolUseID
	case len(ev.Content) > 0:
		s = contentText(ev.Content)
	}
	if ev.Flushed {
		s = "(flushed, not processed) " + s
	}
	return oneLine(s, 80)
}

func printSession(w io.Writer, output string, s rawJSONer) error {
	if output == outputJSON {
		return printJSON(w, s)
	}
	sess, err := decodeRaw[ma.Session](s)
	if err != nil {
		return err
	}
	return fields(w,
		"id", sess.ID,
		"status", sess.Status,
		"title", sess.Title,
		"agent", fmt.Sprintf("%s v%d (%s, model %s)", sess.Agent.ID, sess.Agent.Version, sess.Agent.Name, sess.Agent.Model.ID),
		"environment", sess.EnvironmentID,
		"metadata", metadataString(sess.Metadata),
		"usage", fmt.Sprintf("%d input tokens, %d output tokens", sess.Usage.InputTokens, sess.Usage.OutputTokens),
		"created", sess.CreatedAt,
		"updated", sess.UpdatedAt,
		"archived", deref(sess.ArchivedAt),
	)
}
