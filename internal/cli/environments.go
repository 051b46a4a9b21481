package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/spf13/cobra"

	ma "github.com/reinsdev/reins/managedagents"
)

// environmentFields are the flags that build an environment create or
// update body.
type environmentFields struct {
	file         string
	name         string
	description  string
	configType   string
	networking   string
	allowedHosts []string
	metadata     []string
}

func (f *environmentFields) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.file, "file", "", "a JSON request body (- for stdin); the other flags override its fields")
	fl.StringVar(&f.name, "name", "", "environment name (unique)")
	fl.StringVar(&f.description, "description", "", "description")
	fl.StringVar(&f.configType, "type", "", "cloud or self_hosted (create default: cloud)")
	fl.StringVar(&f.networking, "networking", "", "cloud networking: unrestricted or limited")
	fl.StringArrayVar(&f.allowedHosts, "allowed-host", nil, "a host reachable with --networking limited (repeatable)")
	fl.StringArrayVar(&f.metadata, "metadata", nil, "metadata KEY=VALUE (repeatable)")
}

func (f *environmentFields) body(cmd *cobra.Command, create bool) ([]byte, error) {
	body := map[string]any{}
	if f.file != "" {
		var err error
		if body, err = readBodyFile(f.file, cmd.InOrStdin()); err != nil {
			return nil, err
		}
	}
	if cmd.Flags().Changed("name") {
		body["name"] = f.name
	}
	if cmd.Flags().Changed("description") {
		body["description"] = f.description
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
	typ := f.configType
	if typ == "" && (f.networking != "" || len(f.allowedHosts) > 0 || (create && body["config"] == nil)) {
		typ = ma.EnvCloud
	}
	if typ != "" {
		config, _ := body["config"].(map[string]any)
		if config == nil {
			config = map[string]any{}
		}
		switch typ {
		case ma.EnvCloud:
			config["type"] = ma.EnvCloud
			switch f.networking {
			case "":
				if len(f.allowedHosts) > 0 {
					return nil, fmt.Errorf("--allowed-host needs --networking limited")
				}
			case "unrestricted":
				config["networking"] = map[string]any{"type": "unrestricted"}
			case "limited":
				hosts := f.allowedHosts
				if hosts == nil {
					hosts = []string{}
				}
				config["networking"] = map[string]any{"type": "limited", "allowed_hosts": hosts}
			default:
				return nil, fmt.Errorf("--networking: want unrestricted or limited, got %q", f.networking)
			}
		case ma.EnvSelfHosted:
			if f.networking != "" || len(f.allowedHosts) > 0 {
				return nil, fmt.Errorf("--networking applies to cloud environments only")
			}
			config = map[string]any{"type": ma.EnvSelfHosted}
		default:
			return nil, fmt.Errorf("--type: want cloud or self_hosted, got %q", typ)
		}
		body["config"] = config
	}
	return json.Marshal(body)
}

func newEnvironmentsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "environments",
		Aliases: []string{"envs", "environment"},
		Short:   "Create and manage the environments agents' tools run in",
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(envCreate(cf), envGet(cf), envList(cf), envUpdate(cf), envArchive(cf), envDelete(cf), envWork(cf), envKeys(cf))
	return cmd
}

func envCreate(cf *clientFlags) *cobra.Command {
	var f environmentFields
	cmd := &cobra.Command{
		Use:   "create --name NAME [flags]",
		Short: "Create an environment",
		Example: `  reins environments create --name dev
  reins environments create --name locked --networking limited --allowed-host pypi.org
  reins environments create --name laptop --type self_hosted`,
		Args: cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			body, err := f.body(cmd, true)
			if err != nil {
				return err
			}
			e, err := c.Beta.Environments.New(cmd.Context(), anthropic.BetaEnvironmentNewParams{}, option.WithRequestBody("application/json", body))
			if err != nil {
				return err
			}
			return printEnvironment(cmd.OutOrStdout(), c.output, e)
		}),
	}
	f.register(cmd)
	return cmd
}

func envGet(cf *clientFlags) *cobra.Command {
	return byID(cf, "get ENVIRONMENT_ID", "Show an environment", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaEnvironment, error) {
		return c.Beta.Environments.Get(ctx, id, anthropic.BetaEnvironmentGetParams{})
	}, printEnvironment)
}

func envList(cf *clientFlags) *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List environments",
		Args:  cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			p := anthropic.BetaEnvironmentListParams{}
			p.Limit, p.Page, p.IncludeArchived = lf.opts()
			page, err := c.Beta.Environments.List(cmd.Context(), p)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.output == outputJSON {
				return printJSON(w, page)
			}
			var envs ma.Page[ma.Environment]
			if err := json.Unmarshal([]byte(page.RawJSON()), &envs); err != nil {
				return fmt.Errorf("decode response: %w", err)
			}
			t := newTable(w, "ID", "NAME", "TYPE", "NETWORKING", "UPDATED", "ARCHIVED")
			for _, e := range envs.Data {
				t.row(e.ID, e.Name, e.Config.Type, orDash(networkingSummary(e.Config.Networking)), e.UpdatedAt, orDash(deref(e.ArchivedAt)))
			}
			if err := t.flush(); err != nil {
				return err
			}
			nextPageHint(cmd.ErrOrStderr(), deref(envs.NextPage))
			return nil
		}),
	}
	lf.register(cmd, true)
	return cmd
}

func envUpdate(cf *clientFlags) *cobra.Command {
	var f environmentFields
	cmd := &cobra.Command{
		Use:   "update ENVIRONMENT_ID [flags]",
		Short: "Update an environment (applies to new containers)",
		Args:  cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			body, err := f.body(cmd, false)
			if err != nil {
				return err
			}
			e, err := c.Beta.Environments.Update(cmd.Context(), args[0], anthropic.BetaEnvironmentUpdateParams{}, option.WithRequestBody("application/json", body))
			if err != nil {
				return err
			}
			return printEnvironment(cmd.OutOrStdout(), c.output, e)
		}),
	}
	f.register(cmd)
	return cmd
}

func envArchive(cf *clientFlags) *cobra.Command {
	return byID(cf, "archive ENVIRONMENT_ID", "Archive an environment (no new sessions can use it)", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaEnvironment, error) {
		return c.Beta.Environments.Archive(ctx, id, anthropic.BetaEnvironmentArchiveParams{})
	}, printEnvironment)
}

func envDelete(cf *clientFlags) *cobra.Command {
	return byID(cf, "delete ENVIRONMENT_ID", "Delete an environment", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaEnvironmentDeleteResponse, error) {
		return c.Beta.Environments.Delete(ctx, id, anthropic.BetaEnvironmentDeleteParams{})
	}, printDeleted)
}

func printEnvironment(w io.Writer, output string, e rawJSONer) error {
	if output == outputJSON {
		return printJSON(w, e)
	}
	env, err := decodeRaw[ma.Environment](e)
	if err != nil {
		return err
	}
	return fields(w,
		"id", env.ID,
		"name", env.Name,
		"type", env.Config.Type,
		"networking", networkingSummary(env.Config.Networking),
		"description", env.Description,
		"metadata", metadataString(env.Metadata),
		"created", env.CreatedAt,
		"updated", env.UpdatedAt,
		"archived", deref(env.ArchivedAt),
	)
}

func networkingSummary(n *ma.Networking) string {
	if n == nil {
		return ""
	}
	if n.Type == "limited" && len(n.AllowedHosts) > 0 {
		return "limited (" + strings.Join(n.AllowedHosts, ", ") + ")"
	}
	return n.Type
}
