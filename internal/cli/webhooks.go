package cli

import (
	"context"
	"io"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/spf13/cobra"
)

// newWebhooksCommand is `reins webhooks`: the webhook endpoints of the
// key's workspace (docs/webhooks.md).
func newWebhooksCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "webhooks",
		Aliases: []string{"webhook"},
		Short:   "Manage the webhook endpoints that receive the workspace's events",
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(webhookCreate(cf), webhookList(cf), webhookGet(cf), webhookUpdate(cf), webhookDelete(cf), webhookRotate(cf))
	return cmd
}

// webhookView is what the text output shows of an endpoint.
type webhookView struct {
	ID             string   `json:"id"`
	URL            string   `json:"url"`
	Name           string   `json:"name"`
	Description    string   `json:"description"`
	EnabledEvents  []string `json:"enabled_events"`
	State          string   `json:"state"`
	DisabledReason string   `json:"disabled_reason"`
	CreatedAt      string   `json:"created_at"`
	SigningSecret  string   `json:"signing_secret"`
}

func printWebhook(w io.Writer, output string, v rawJSONer) error {
	if output == outputJSON {
		return printJSON(w, v)
	}
	e, err := decodeRaw[webhookView](v)
	if err != nil {
		return err
	}
	kv := []string{"id", e.ID, "url", e.URL, "name", e.Name, "description", e.Description,
		"events", strings.Join(e.EnabledEvents, ","), "state", e.State, "disabled_reason", orDash(e.DisabledReason), "created", e.CreatedAt}
	if e.SigningSecret != "" {
		kv = append(kv, "signing_secret", e.SigningSecret+" (shown once)")
	}
	return fields(w, kv...)
}

func webhookCreate(cf *clientFlags) *cobra.Command {
	var p anthropic.BetaOrganizationWebhookNewParams
	var name, description string
	cmd := &cobra.Command{
		Use:     "create URL --event TYPE [--event TYPE…]",
		Short:   "Register a webhook endpoint; prints its signing secret, shown this once",
		Example: `  reins webhooks create https://hooks.example.com/reins --event session.status_idled --event session.deleted`,
		Args:    cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			p.URL = args[0]
			if name != "" {
				p.Name = anthropic.String(name)
			}
			if description != "" {
				p.Description = anthropic.String(description)
			}
			e, err := c.Beta.Organization.Webhooks.New(cmd.Context(), p)
			if err != nil {
				return err
			}
			return printWebhook(cmd.OutOrStdout(), c.output, e)
		}),
	}
	cmd.Flags().StringArrayVar(&p.EnabledEvents, "event", nil, "an event type to receive (repeatable), e.g. session.created")
	cmd.Flags().StringVar(&name, "name", "", "a name")
	cmd.Flags().StringVar(&description, "description", "", "a description")
	_ = cmd.MarkFlagRequired("event")
	return cmd
}

func webhookList(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the workspace's webhook endpoints, newest first",
		Args:  cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			page, err := c.Beta.Organization.Webhooks.List(cmd.Context(), anthropic.BetaOrganizationWebhookListParams{Limit: anthropic.Int(100)})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.output == outputJSON {
				return printJSON(w, page)
			}
			t := newTable(w, "ID", "URL", "STATE", "EVENTS")
			for _, e := range page.Data {
				t.row(e.ID, e.URL, string(e.State), strings.Join(e.EnabledEvents, ","))
			}
			return t.flush()
		}),
	}
}

func webhookGet(cf *clientFlags) *cobra.Command {
	return byID(cf, "get WEBHOOK_ID", "Show a webhook endpoint", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaOrganizationWebhookEndpoint, error) {
		return c.Beta.Organization.Webhooks.Get(ctx, id, anthropic.BetaOrganizationWebhookGetParams{})
	}, printWebhook)
}

func webhookUpdate(cf *clientFlags) *cobra.Command {
	var url, name, description, state string
	var events []string
	cmd := &cobra.Command{
		Use:     "update WEBHOOK_ID [--endpoint-url URL] [--event TYPE…] [--state enabled|disabled]",
		Short:   "Change a webhook endpoint; --event replaces its events, --state enabled re-enables it",
		Example: `  reins webhooks update whep_… --state enabled`,
		Args:    cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			p := anthropic.BetaOrganizationWebhookUpdateParams{EnabledEvents: events, State: anthropic.BetaOrganizationWebhookUpdateParamsState(state)}
			if cmd.Flags().Changed("endpoint-url") {
				p.URL = anthropic.String(url)
			}
			if cmd.Flags().Changed("name") {
				p.Name = anthropic.String(name)
			}
			if cmd.Flags().Changed("description") {
				p.Description = anthropic.String(description)
			}
			e, err := c.Beta.Organization.Webhooks.Update(cmd.Context(), args[0], p)
			if err != nil {
				return err
			}
			return printWebhook(cmd.OutOrStdout(), c.output, e)
		}),
	}
	cmd.Flags().StringVar(&url, "endpoint-url", "", "the receiver's new https URL")
	cmd.Flags().StringArrayVar(&events, "event", nil, "an event type to receive (repeatable; replaces the list)")
	cmd.Flags().StringVar(&name, "name", "", "a name")
	cmd.Flags().StringVar(&description, "description", "", "a description")
	cmd.Flags().StringVar(&state, "state", "", "enabled or disabled")
	return cmd
}

func webhookDelete(cf *clientFlags) *cobra.Command {
	return byID(cf, "delete WEBHOOK_ID", "Delete a webhook endpoint and its queued deliveries", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaDeletedOrganizationWebhookEndpoint, error) {
		return c.Beta.Organization.Webhooks.Delete(ctx, id, anthropic.BetaOrganizationWebhookDeleteParams{})
	}, printDeleted)
}

func webhookRotate(cf *clientFlags) *cobra.Command {
	return byID(cf, "rotate-secret WEBHOOK_ID", "Make a new signing secret and print it, shown this once", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaOrganizationWebhookEndpointSigningSecret, error) {
		return c.Beta.Organization.Webhooks.RegenerateSigningSecret(ctx, id, anthropic.BetaOrganizationWebhookRegenerateSigningSecretParams{})
	}, printSecret)
}

// printSecret prints a regenerated signing secret.
func printSecret(w io.Writer, output string, v rawJSONer) error {
	if output == outputJSON {
		return printJSON(w, v)
	}
	s, err := decodeRaw[webhookView](v)
	if err != nil {
		return err
	}
	return fields(w, "signing_secret", s.SigningSecret+" (shown once)")
}
