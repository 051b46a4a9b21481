package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/spf13/cobra"

	ma "github.com/reinsdev/reins/managedagents"
)

// newMemoryCommand is `reins memory`: memory stores, their memories seen
// as a tree of files, and the versions that record every change.
func newMemoryCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "memory",
		Aliases: []string{"memories"},
		Short:   "Memory stores, their memories (as files) and their versions",
		Long: `Memory stores hold small text files (memories) that agents read and write under
/mnt/memory/<store> in their sessions. Every change is a version: who made it
(an API key or a session) and the content it wrote.

A memory is named by its path (/notes/todo.md) or its id (mem_…).`,
		Example: `  reins memory stores create --name "User preferences"
  reins memory ls memstore_01… --depth 1
  echo "Answer briefly." | reins memory put memstore_01… /style.md
  reins memory cat memstore_01… /style.md
  reins memory versions memstore_01… --path /style.md
  reins memory diff memstore_01… memver_01… memver_02…`,
	}
	cf := addClientFlags(cmd)
	stores := &cobra.Command{
		Use:     "stores",
		Aliases: []string{"store"},
		Short:   "Create and manage memory stores",
	}
	stores.AddCommand(memStoreList(cf), memStoreCreate(cf), memStoreGet(cf), memStoreUpdate(cf), memStoreArchive(cf), memStoreDelete(cf))
	cmd.AddCommand(stores, memLs(cf), memCat(cf), memPut(cf), memRm(cf), memVersions(cf), memVersion(cf), memRedact(cf), memDiff(cf))
	return cmd
}

func memStoreList(cf *clientFlags) *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List memory stores",
		Args:  cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			p := anthropic.BetaMemoryStoreListParams{}
			p.Limit, p.Page, p.IncludeArchived = lf.opts()
			page, err := c.Beta.MemoryStores.List(cmd.Context(), p)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.output == outputJSON {
				return printJSON(w, page)
			}
			stores, err := decodeRaw[ma.Page[ma.MemoryStore]](page)
			if err != nil {
				return err
			}
			t := newTable(w, "ID", "NAME", "DESCRIPTION", "UPDATED", "ARCHIVED")
			for _, s := range stores.Data {
				t.row(s.ID, s.Name, orDash(oneLine(s.Description, 40)), s.UpdatedAt, orDash(deref(s.ArchivedAt)))
			}
			if err := t.flush(); err != nil {
				return err
			}
			nextPageHint(cmd.ErrOrStderr(), deref(stores.NextPage))
			return nil
		}),
	}
	lf.register(cmd, true)
	return cmd
}

func memStoreCreate(cf *clientFlags) *cobra.Command {
	var name, description string
	var metadata []string
	cmd := &cobra.Command{
		Use:     "create --name NAME [--description TEXT] [--metadata KEY=VALUE]",
		Short:   "Create a memory store",
		Long:    "Create a memory store. Its description is put in the system prompt of the agents of the sessions it is attached to.",
		Example: `  reins memory stores create --name "User preferences" --description "What the user likes"`,
		Args:    cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			md, err := stringPairs("metadata", metadata)
			if err != nil {
				return err
			}
			p := anthropic.BetaMemoryStoreNewParams{Name: name, Metadata: md}
			if cmd.Flags().Changed("description") {
				p.Description = anthropic.String(description)
			}
			s, err := c.Beta.MemoryStores.New(cmd.Context(), p)
			if err != nil {
				return err
			}
			return printMemoryStore(cmd.OutOrStdout(), c.output, s)
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "the store's name (1–255 characters; its directory in sessions is made from it)")
	cmd.Flags().StringVar(&description, "description", "", "what the store holds, for the agent (at most 1,024 characters)")
	cmd.Flags().StringArrayVar(&metadata, "metadata", nil, "metadata KEY=VALUE (repeatable)")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func memStoreGet(cf *clientFlags) *cobra.Command {
	return byID(cf, "get STORE_ID", "Show a memory store", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsMemoryStore, error) {
		return c.Beta.MemoryStores.Get(ctx, id, anthropic.BetaMemoryStoreGetParams{})
	}, printMemoryStore)
}

func memStoreUpdate(cf *clientFlags) *cobra.Command {
	var name, description string
	var metadata, unset []string
	cmd := &cobra.Command{
		Use:     "update STORE_ID [--name NAME] [--description TEXT] [--metadata KEY=VALUE] [--unset-metadata KEY]",
		Short:   "Rename a memory store, or change its description or metadata",
		Example: `  reins memory stores update memstore_01… --description "" --unset-metadata team`,
		Args:    cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			body, err := storeUpdateBody(cmd, name, description, metadata, unset)
			if err != nil {
				return err
			}
			s, err := c.Beta.MemoryStores.Update(cmd.Context(), args[0], anthropic.BetaMemoryStoreUpdateParams{},
				option.WithRequestBody("application/json", body))
			if err != nil {
				return err
			}
			return printMemoryStore(cmd.OutOrStdout(), c.output, s)
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "a new name")
	cmd.Flags().StringVar(&description, "description", "", `a new description ("" clears it)`)
	cmd.Flags().StringArrayVar(&metadata, "metadata", nil, "set metadata KEY=VALUE (repeatable)")
	cmd.Flags().StringArrayVar(&unset, "unset-metadata", nil, "remove the metadata KEY (repeatable)")
	return cmd
}

// storeUpdateBody is the body of a store update: the fields whose flags
// were given, metadata as a patch (null removes a key).
func storeUpdateBody(cmd *cobra.Command, name, description string, metadata, unset []string) ([]byte, error) {
	body := map[string]any{}
	if cmd.Flags().Changed("name") {
		body["name"] = name
	}
	if cmd.Flags().Changed("description") {
		body["description"] = description
	}
	md, err := parsePairs("metadata", metadata)
	if err != nil {
		return nil, err
	}
	for _, k := range unset {
		if md == nil {
			md = map[string]any{}
		}
		md[k] = nil
	}
	if md != nil {
		body["metadata"] = md
	}
	if len(body) == 0 {
		return nil, errors.New("nothing to update: give --name, --description, --metadata or --unset-metadata")
	}
	return json.Marshal(body)
}

func memStoreArchive(cf *clientFlags) *cobra.Command {
	return byID(cf, "archive STORE_ID", "Archive a memory store for good (read-only, not attachable to new sessions)",
		func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsMemoryStore, error) {
			return c.Beta.MemoryStores.Archive(ctx, id, anthropic.BetaMemoryStoreArchiveParams{})
		}, printMemoryStore)
}

func memStoreDelete(cf *clientFlags) *cobra.Command {
	return byID(cf, "delete STORE_ID", "Delete a memory store, its memories and all their versions",
		func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaManagedAgentsDeletedMemoryStore, error) {
			return c.Beta.MemoryStores.Delete(ctx, id, anthropic.BetaMemoryStoreDeleteParams{})
		}, printDeleted)
}

func printMemoryStore(w io.Writer, output string, v rawJSONer) error {
	if output == outputJSON {
		return printJSON(w, v)
	}
	s, err := decodeRaw[ma.MemoryStore](v)
	if err != nil {
		return err
	}
	return fields(w,
		"id", s.ID,
		"name", s.Name,
		"description", s.Description,
		"metadata", metadataString(s.Metadata),
		"created", s.CreatedAt,
		"updated", s.UpdatedAt,
		"archived", deref(s.ArchivedAt),
	)
}

// stringPairs parses repeated KEY=VALUE flags into a string map.
func stringPairs(flag string, pairs []string) (map[string]string, error) {
	m, err := parsePairs(flag, pairs)
	if err != nil || m == nil {
		return nil, err
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v.(string)
	}
	return out, nil
}
