package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/spf13/cobra"

	anthropicmodel "github.com/reinsdev/reins/internal/model/anthropic"
	ma "github.com/reinsdev/reins/managedagents"
)

// agentFields are the flags that build an agent create or update body.
type agentFields struct {
	file        string
	name        string
	model       string
	system      string
	description string
	metadata    []string
	toolset     string
	customTools []string
}

func (f *agentFields) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.file, "file", "", "a JSON request body (- for stdin); the other flags override its fields")
	fl.StringVar(&f.name, "name", "", "agent name")
	fl.StringVar(&f.model, "model", "", "model id, e.g. "+anthropicmodel.DefaultModel+" or scripted")
	fl.StringVar(&f.system, "system", "", "system prompt")
	fl.StringVar(&f.description, "description", "", "description")
	fl.StringArrayVar(&f.metadata, "metadata", nil, "metadata KEY=VALUE (repeatable)")
	fl.StringVar(&f.toolset, "toolset", "", "add the built-in agent toolset with this permission policy: always_allow or always_ask")
	fl.StringArrayVar(&f.customTools, "custom-tool", nil, "add a custom tool NAME or NAME=DESCRIPTION taking any JSON object (repeatable)")
}

// body builds the request body: the --file object with the flags on top.
func (f *agentFields) body(cmd *cobra.Command) ([]byte, error) {
	body := map[string]any{}
	if f.file != "" {
		var err error
		if body, err = readBodyFile(f.file, cmd.InOrStdin()); err != nil {
			return nil, err
		}
	}
	set := func(flag, key, v string) {
		if cmd.Flags().Changed(flag) {
			body[key] = v
		}
	}
	set("name", "name", f.name)
	set("system", "system", f.system)
	set("description", "description", f.description)
	if f.model != "" {
		body["model"] = map[string]any{"id": f.model}
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
	var tools []any
	if f.toolset != "" {
		if f.toolset != ma.PolicyAlwaysAllow && f.toolset != ma.PolicyAlwaysAsk {
			return nil, fmt.Errorf("--toolset: want always_allow or always_ask, got %q", f.toolset)
		}
		tools = append(tools, map[string]any{
			"type":           ma.ToolTypeAgentToolset,
			"default_config": map[string]any{"enabled": true, "permission_policy": map[string]any{"type": f.toolset}},
		})
	}
	for _, t := range f.customTools {
		name, desc, _ := strings.Cut(t, "=")
		if name == "" {
			return nil, fmt.Errorf("--custom-tool: want NAME or NAME=DESCRIPTION, got %q", t)
		}
		if desc == "" {
			desc = "The " + name + " tool."
		}
		tools = append(tools, map[string]any{"type": ma.ToolTypeCustom, "name": name, "description": desc,
			"input_schema": map[string]any{"type": "object"}})
	}
	if len(tools) > 0 {
		existing, _ := body["tools"].([]any)
		body["tools"] = append(existing, tools...)
	}
	return json.Marshal(body)
}

func newAgentsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "Create, inspect and version agents",
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(agentsCreate(cf), agentsGet(cf), agentsList(cf), agentsUpdate(cf), agentsArchive(cf), agentsVersions(cf))
	return cmd
}

func agentsCreate(cf *clientFlags) *cobra.Command {
	var f agentFields
	cmd := &cobra.Command{
		Use:   "create --name NAME --model MODEL [flags]",
		Short: "Create an agent",
		Example: `  reins agents create --name helper --model scripted --system "Be brief." --toolset always_allow
  reins agents create --file agent.json`,
		Args: cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			body, err := f.body(cmd)
			if err != nil {
				return err
			}
			a, err := c.Beta.Agents.New(cmd.Context(), anthropic.BetaAgentNewParams{}, option.WithRequestBody("application/json", body))
			if err != nil {
				return err
			}
			return printAgent(cmd.OutOrStdout(), c.output, a)
		}),
	}
	f.register(cmd)
	return cmd
}

func agentsGet(cf *clientFlags) *cobra.Command {
	var version int64
	cmd := &cobra.Command{
		Use:   "get AGENT_ID",
		Short: "Show an agent (its latest version, or --version N)",
		Args:  cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			var p anthropic.BetaAgentGetParams
			if version > 0 {
				p.Version = anthropic.Int(version)
			}
			a, err := c.Beta.Agents.Get(cmd.Context(), args[0], p)
			if err != nil {
				return err
			}
			return printAgent(cmd.OutOrStdout(), c.output, a)
		}),
	}
	cmd.Flags().Int64Var(&version, "version", 0, "a past version")
	return cmd
}

func agentsList(cf *clientFlags) *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List agents",
		Args:  cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			p := anthropic.BetaAgentListParams{}
			p.Limit, p.Page, p.IncludeArchived = lf.opts()
			page, err := c.Beta.Agents.List(cmd.Context(), p)
			if err != nil {
				return err
			}
			return printAgentPage(cmd, c.output, page.RawJSON())
		}),
	}
	lf.register(cmd, true)
	return cmd
}

func agentsUpdate(cf *clientFlags) *cobra.Command {
	var f agentFields
	var version int64
	cmd := &cobra.Command{
		Use:   "update AGENT_ID [flags]",
		Short: "Update an agent (a change makes a new version)",
		Example: `  reins agents update agent_01… --system "Answer in French." --version 1
  reins agents update agent_01… --file changes.json`,
		Args: cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			body, err := f.body(cmd)
			if err != nil {
				return err
			}
			opts := []option.RequestOption{option.WithRequestBody("application/json", body)}
			if version > 0 {
				opts = append(opts, option.WithJSONSet("version", version))
			}
			a, err := c.Beta.Agents.Update(cmd.Context(), args[0], anthropic.BetaAgentUpdateParams{}, opts...)
			if err != nil {
				return err
			}
			return printAgent(cmd.OutOrStdout(), c.output, a)
		}),
	}
	f.register(cmd)
	cmd.Flags().Int64Var(&version, "version", 0, "fail (409) unless the agent is still at this version")
	return cmd
}

func agentsArchive(cf *clientFlags) *cobra.Command {
	return byID(cf, "archive AGENT_ID", "Archive an agent (no new sessions can use it)", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsAgent, error) {
		return c.Beta.Agents.Archive(ctx, id, anthropic.BetaAgentArchiveParams{})
	}, printAgent)
}

func agentsVersions(cf *clientFlags) *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "versions AGENT_ID",
		Short: "List the versions of an agent",
		Args:  cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			p := anthropic.BetaAgentVersionListParams{}
			p.Limit, p.Page, _ = lf.opts()
			page, err := c.Beta.Agents.Versions.List(cmd.Context(), args[0], p)
			if err != nil {
				return err
			}
			return printAgentPage(cmd, c.output, page.RawJSON())
		}),
	}
	lf.register(cmd, false)
	return cmd
}

// listFlags are the paging flags of list commands.
type listFlags struct {
	limit           int64
	page            string
	includeArchived bool
}

// opts returns the flags as the SDK's optional list fields; a flag left
// unset stays omitted.
func (lf *listFlags) opts() (limit param.Opt[int64], page param.Opt[string], archived param.Opt[bool]) {
	if lf.limit > 0 {
		limit = anthropic.Int(lf.limit)
	}
	if lf.page != "" {
		page = anthropic.String(lf.page)
	}
	if lf.includeArchived {
		archived = anthropic.Bool(true)
	}
	return limit, page, archived
}

func (lf *listFlags) register(cmd *cobra.Command, archived bool) {
	cmd.Flags().Int64Var(&lf.limit, "limit", 0, "page size (server default when 0)")
	cmd.Flags().StringVar(&lf.page, "page", "", "page cursor from a previous list")
	if archived {
		cmd.Flags().BoolVar(&lf.includeArchived, "include-archived", false, "include archived resources")
	}
}

func printAgent(w io.Writer, output string, a rawJSONer) error {
	if output == outputJSON {
		return printJSON(w, a)
	}
	ag, err := decodeRaw[ma.Agent](a)
	if err != nil {
		return err
	}
	return fields(w,
		"id", ag.ID,
		"name", ag.Name,
		"version", strconv.FormatInt(ag.Version, 10),
		"model", ag.Model.ID,
		"description", ag.Description,
		"system", oneLine(ag.System, 100),
		"tools", toolsSummary(ag.Tools),
		"metadata", metadataString(ag.Metadata),
		"created", ag.CreatedAt,
		"updated", ag.UpdatedAt,
		"archived", deref(ag.ArchivedAt),
	)
}

func printAgentPage(cmd *cobra.Command, output, raw string) error {
	w := cmd.OutOrStdout()
	if output == outputJSON {
		return writeIndented(w, []byte(raw))
	}
	var page ma.Page[ma.Agent]
	if err := json.Unmarshal([]byte(raw), &page); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	t := newTable(w, "ID", "NAME", "VERSION", "MODEL", "UPDATED", "ARCHIVED")
	for _, a := range page.Data {
		t.row(a.ID, a.Name, strconv.FormatInt(a.Version, 10), a.Model.ID, a.UpdatedAt, orDash(deref(a.ArchivedAt)))
	}
	if err := t.flush(); err != nil {
		return err
	}
	nextPageHint(cmd.ErrOrStderr(), deref(page.NextPage))
	return nil
}

// toolsSummary names an agent's tools briefly.
func toolsSummary(tools []ma.Tool) string {
	var parts []string
	for _, t := range tools {
		switch t.Type {
		case ma.ToolTypeCustom:
			parts = append(parts, "custom:"+t.Name)
		case ma.ToolTypeMCPToolset:
			parts = append(parts, "mcp:"+t.MCPServerName)
		default:
			s := t.Type
			if t.DefaultConfig != nil && t.DefaultConfig.PermissionPolicy != nil {
				s += "(" + t.DefaultConfig.PermissionPolicy.Type + ")"
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ", ")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// oneLine flattens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
