package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/spf13/cobra"

	ma "github.com/reinsdev/reins/managedagents"
)

func newVaultsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "vaults",
		Aliases: []string{"vault"},
		Short:   "Create and manage vaults and the credentials they hold",
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(vaultCreate(cf), vaultGet(cf), vaultList(cf), vaultArchive(cf), vaultDelete(cf), vaultCredentials(cf))
	return cmd
}

func vaultCreate(cf *clientFlags) *cobra.Command {
	var name string
	var metadata []string
	cmd := &cobra.Command{
		Use:     "create --name NAME [--metadata KEY=VALUE]",
		Short:   "Create a vault",
		Example: `  reins vaults create --name github --metadata team=docs`,
		Args:    cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			body := map[string]any{"display_name": name}
			md, err := parsePairs("metadata", metadata)
			if err != nil {
				return err
			}
			if md != nil {
				body["metadata"] = md
			}
			raw, err := json.Marshal(body)
			if err != nil {
				return err
			}
			v, err := c.Beta.Vaults.New(cmd.Context(), anthropic.BetaVaultNewParams{}, option.WithRequestBody("application/json", raw))
			if err != nil {
				return err
			}
			return printVault(cmd.OutOrStdout(), c.output, v)
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "the vault's display name (1–255 characters)")
	cmd.Flags().StringArrayVar(&metadata, "metadata", nil, "metadata KEY=VALUE (repeatable)")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func vaultGet(cf *clientFlags) *cobra.Command {
	return byID(cf, "get VAULT_ID", "Show a vault", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsVault, error) {
		return c.Beta.Vaults.Get(ctx, id, anthropic.BetaVaultGetParams{})
	}, printVault)
}

func vaultList(cf *clientFlags) *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List vaults",
		Args:  cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			p := anthropic.BetaVaultListParams{}
			p.Limit, p.Page, p.IncludeArchived = lf.opts()
			page, err := c.Beta.Vaults.List(cmd.Context(), p)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.output == outputJSON {
				return printJSON(w, page)
			}
			vaults, err := decodeRaw[ma.Page[ma.Vault]](page)
			if err != nil {
				return err
			}
			t := newTable(w, "ID", "NAME", "UPDATED", "ARCHIVED")
			for _, v := range vaults.Data {
				t.row(v.ID, v.DisplayName, v.UpdatedAt, orDash(deref(v.ArchivedAt)))
			}
			if err := t.flush(); err != nil {
				return err
			}
			nextPageHint(cmd.ErrOrStderr(), deref(vaults.NextPage))
			return nil
		}),
	}
	lf.register(cmd, true)
	return cmd
}

func vaultArchive(cf *clientFlags) *cobra.Command {
	return byID(cf, "archive VAULT_ID", "Archive a vault and all its credentials", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsVault, error) {
		return c.Beta.Vaults.Archive(ctx, id, anthropic.BetaVaultArchiveParams{})
	}, printVault)
}

func vaultDelete(cf *clientFlags) *cobra.Command {
	return byID(cf, "delete VAULT_ID", "Delete a vault and its credentials", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsDeletedVault, error) {
		return c.Beta.Vaults.Delete(ctx, id, anthropic.BetaVaultDeleteParams{})
	}, printDeleted)
}

func printVault(w io.Writer, output string, v rawJSONer) error {
	if output == outputJSON {
		return printJSON(w, v)
	}
	vt, err := decodeRaw[ma.Vault](v)
	if err != nil {
		return err
	}
	return fields(w,
		"id", vt.ID,
		"name", vt.DisplayName,
		"metadata", metadataString(vt.Metadata),
		"created", vt.CreatedAt,
		"updated", vt.UpdatedAt,
		"archived", deref(vt.ArchivedAt),
	)
}

// vaultCredentials is `reins vaults credentials`.
func vaultCredentials(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "credentials",
		Aliases: []string{"credential", "creds"},
		Short:   "Manage a vault's credentials (secrets are sent, never shown)",
	}
	cmd.AddCommand(credCreate(cf), credGet(cf), credList(cf), credArchive(cf), credDelete(cf))
	return cmd
}

func credList(cf *clientFlags) *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list VAULT_ID",
		Short: "List a vault's credentials (never the secrets)",
		Args:  cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			p := anthropic.BetaVaultCredentialListParams{}
			p.Limit, p.Page, p.IncludeArchived = lf.opts()
			page, err := c.Beta.Vaults.Credentials.List(cmd.Context(), args[0], p)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.output == outputJSON {
				return printJSON(w, page)
			}
			creds, err := decodeRaw[ma.Page[ma.Credential]](page)
			if err != nil {
				return err
			}
			t := newTable(w, "ID", "TYPE", "FOR", "NAME", "UPDATED", "ARCHIVED")
			for _, cr := range creds.Data {
				t.row(cr.ID, cr.Auth.Type, credentialTarget(cr.Auth), orDash(deref(cr.DisplayName)), cr.UpdatedAt, orDash(deref(cr.ArchivedAt)))
			}
			if err := t.flush(); err != nil {
				return err
			}
			nextPageHint(cmd.ErrOrStderr(), deref(creds.NextPage))
			return nil
		}),
	}
	lf.register(cmd, true)
	return cmd
}

// byVaultAndID builds a command that takes a vault id and a credential
// id, calls the API with them and prints the answer.
func byVaultAndID[T rawJSONer](cf *clientFlags, use, short string,
	call func(ctx context.Context, c *apiClient, vaultID, id string) (T, error),
	print func(w io.Writer, output string, v rawJSONer) error,
) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			v, err := call(cmd.Context(), c, args[0], args[1])
			if err != nil {
				return err
			}
			return print(cmd.OutOrStdout(), c.output, v)
		}),
	}
}

func credGet(cf *clientFlags) *cobra.Command {
	return byVaultAndID(cf, "get VAULT_ID CREDENTIAL_ID", "Show a credential (never its secrets)",
		func(ctx context.Context, c *apiClient, vaultID, id string) (*anthropic.BetaManagedAgentsCredential, error) {
			return c.Beta.Vaults.Credentials.Get(ctx, id, anthropic.BetaVaultCredentialGetParams{VaultID: vaultID})
		}, printCredential)
}

func credArchive(cf *clientFlags) *cobra.Command {
	return byVaultAndID(cf, "archive VAULT_ID CREDENTIAL_ID", "Archive a credential (sessions stop using it)",
		func(ctx context.Context, c *apiClient, vaultID, id string) (*anthropic.BetaManagedAgentsCredential, error) {
			return c.Beta.Vaults.Credentials.Archive(ctx, id, anthropic.BetaVaultCredentialArchiveParams{VaultID: vaultID})
		}, printCredential)
}

func credDelete(cf *clientFlags) *cobra.Command {
	return byVaultAndID(cf, "delete VAULT_ID CREDENTIAL_ID", "Delete a credential",
		func(ctx context.Context, c *apiClient, vaultID, id string) (*anthropic.BetaManagedAgentsDeletedCredential, error) {
			return c.Beta.Vaults.Credentials.Delete(ctx, id, anthropic.BetaVaultCredentialDeleteParams{VaultID: vaultID})
		}, printDeleted)
}

func printCredential(w io.Writer, output string, v rawJSONer) error {
	if output == outputJSON {
		return printJSON(w, v)
	}
	cr, err := decodeRaw[ma.Credential](v)
	if err != nil {
		return err
	}
	a := cr.Auth
	var refresh, injection string
	if r := a.Refresh; r != nil {
		refresh = fmt.Sprintf("client %s at %s (%s)", r.ClientID, r.TokenEndpoint, r.TokenEndpointAuth.Type)
	}
	if l := a.InjectionLocation; l != nil {
		injection = fmt.Sprintf("header=%t body=%t", l.Header, l.Body)
	}
	var networking string
	if n := a.Networking; n != nil {
		networking = networkingSummary(&ma.Networking{Type: n.Type, AllowedHosts: n.AllowedHosts})
	}
	return fields(w,
		"id", cr.ID,
		"vault", cr.VaultID,
		"type", a.Type,
		"name", deref(cr.DisplayName),
		"mcp server", a.MCPServerURL,
		"secret name", a.SecretName,
		"networking", networking,
		"injection", injection,
		"expires", deref(a.ExpiresAt),
		"refresh", refresh,
		"metadata", metadataString(cr.Metadata),
		"created", cr.CreatedAt,
		"updated", cr.UpdatedAt,
		"archived", deref(cr.ArchivedAt),
	)
}

// credentialTarget is what a credential authenticates: its MCP server
// URL, or the environment variable it fills.
func credentialTarget(a ma.CredentialAuth) string {
	if a.Type == ma.AuthEnvVar {
		return "$" + a.SecretName
	}
	return a.MCPServerURL
}
