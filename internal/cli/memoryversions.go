package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/spf13/cobra"

	ma "github.com/reinsdev/reins/managedagents"
)

// versionFilters are the flags of `memory versions`.
type versionFilters struct {
	lf                               listFlags
	path, memory, operation, session string
	apiKey                           string
}

func memVersions(cf *clientFlags) *cobra.Command {
	var f versionFilters
	cmd := &cobra.Command{
		Use:   "versions STORE_ID [--path PATH | --memory MEMORY_ID] [--operation OP] [--session SESSION_ID] [--api-key-id KEY_ID]",
		Short: "List a store's memory versions, newest first",
		Long: `List the versions of a store's memories, newest first: what changed (created,
modified, deleted), the path, the size and who made it (an API key, or a
session writing under /mnt/memory). --path names a memory by its current path;
the versions of a deleted memory are found with --memory and its id.`,
		Example: `  reins memory versions memstore_01… --path /style.md
  reins memory versions memstore_01… --session sesn_01…`,
		Args: cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			p, err := f.params(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			page, err := c.Beta.MemoryStores.MemoryVersions.List(cmd.Context(), args[0], p)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.output == outputJSON {
				return printJSON(w, page)
			}
			vs, err := decodeRaw[ma.Page[ma.MemoryVersion]](page)
			if err != nil {
				return err
			}
			t := newTable(w, "VERSION", "OPERATION", "PATH", "SIZE", "BY", "CREATED", "REDACTED")
			for _, v := range vs.Data {
				t.row(v.ID, v.Operation, orDash(deref(v.Path)), orDash(sizeOf(v.ContentSizeBytes)), orDash(actorString(v.CreatedBy)),
					v.CreatedAt, orDash(deref(v.RedactedAt)))
			}
			if err := t.flush(); err != nil {
				return err
			}
			nextPageHint(cmd.ErrOrStderr(), deref(vs.NextPage))
			return nil
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.path, "path", "", "the versions of the memory at this path")
	fl.StringVar(&f.memory, "memory", "", "the versions of this memory (also once deleted)")
	fl.StringVar(&f.operation, "operation", "", "created, modified or deleted")
	fl.StringVar(&f.session, "session", "", "the versions a session wrote")
	fl.StringVar(&f.apiKey, "api-key-id", "", "the versions an API key wrote (its id)")
	cmd.MarkFlagsMutuallyExclusive("path", "memory")
	f.lf.register(cmd, false)
	return cmd
}

// params are the list parameters the filters ask for; --path is looked up.
func (f *versionFilters) params(ctx context.Context, c *apiClient, storeID string) (anthropic.BetaMemoryStoreMemoryVersionListParams, error) {
	p := anthropic.BetaMemoryStoreMemoryVersionListParams{}
	p.Limit, p.Page, _ = f.lf.opts()
	memory := f.memory
	if f.path != "" {
		if !strings.HasPrefix(f.path, "/") {
			return p, fmt.Errorf("--path: a memory path starts with /, got %q", f.path)
		}
		id, err := memoryID(ctx, c, storeID, f.path)
		if err != nil {
			return p, fmt.Errorf("%w (for a deleted memory's versions, pass --memory with its id)", err)
		}
		memory = id
	}
	if memory != "" {
		p.MemoryID = anthropic.String(memory)
	}
	if f.operation != "" {
		p.Operation = anthropic.BetaManagedAgentsMemoryVersionOperation(f.operation)
	}
	if f.session != "" {
		p.SessionID = anthropic.String(f.session)
	}
	if f.apiKey != "" {
		p.APIKeyID = anthropic.String(f.apiKey)
	}
	return p, nil
}

// actorString is who made a change: "session sesn_…", "api key
// apikey_…"; "" when not recorded.
func actorString(a *ma.Actor) string {
	if a == nil {
		return ""
	}
	switch a.Type {
	case ma.ActorSession:
		return "session " + a.SessionID
	case ma.ActorAPI:
		return "api key " + a.APIKeyID
	case ma.ActorUser:
		return "user " + a.UserID
	case ma.ActorServiceAccount:
		return "service account " + a.ServiceAccountID
	}
	return a.Type
}

func sizeOf(n *int64) string {
	if n == nil {
		return ""
	}
	return byteSize(*n)
}

// getVersion reads a version with its content.
func getVersion(ctx context.Context, c *apiClient, storeID, id string) (*anthropic.BetaManagedAgentsMemoryVersion, ma.MemoryVersion, error) {
	v, err := c.Beta.MemoryStores.MemoryVersions.Get(ctx, id, anthropic.BetaMemoryStoreMemoryVersionGetParams{
		MemoryStoreID: storeID, View: anthropic.BetaManagedAgentsMemoryViewFull})
	if err != nil {
		return nil, ma.MemoryVersion{}, err
	}
	mv, err := decodeRaw[ma.MemoryVersion](v)
	return v, mv, err
}

func memVersion(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "version STORE_ID VERSION_ID",
		Short:   "Show a memory version and the content it wrote",
		Example: `  reins memory version memstore_01… memver_01…`,
		Args:    cobra.ExactArgs(2),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			raw, v, err := getVersion(cmd.Context(), c, args[0], args[1])
			if err != nil {
				return err
			}
			if c.output == outputJSON {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			return printVersion(cmd.OutOrStdout(), v, true)
		}),
	}
}

// printVersion writes a version's fields and, with content, what it
// wrote after a blank line.
func printVersion(w io.Writer, v ma.MemoryVersion, content bool) error {
	var sha string
	if v.ContentSHA256 != nil {
		sha = *v.ContentSHA256
	}
	err := fields(w,
		"id", v.ID,
		"memory", v.MemoryID,
		"store", v.MemoryStoreID,
		"operation", v.Operation,
		"path", deref(v.Path),
		"size", sizeOf(v.ContentSizeBytes),
		"sha256", sha,
		"by", actorString(v.CreatedBy),
		"created", v.CreatedAt,
		"redacted", deref(v.RedactedAt),
		"redacted by", actorString(v.RedactedBy),
	)
	if err != nil || !content || v.Content == nil {
		return err
	}
	_, err = fmt.Fprintf(w, "\n%s", *v.Content)
	return err
}

func memRedact(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "redact STORE_ID VERSION_ID",
		Short: "Erase the content and path a version recorded (for good)",
		Long: `Redact a version: its content, hash, size and path are erased for good, and who
redacted it and when recorded; the version stays in the list. The memory's
current content is not changed (write it anew with put if it holds what must go).`,
		Example: `  reins memory redact memstore_01… memver_01…`,
		Args:    cobra.ExactArgs(2),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			raw, err := c.Beta.MemoryStores.MemoryVersions.Redact(cmd.Context(), args[1], anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: args[0]})
			if err != nil {
				return err
			}
			if c.output == outputJSON {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			v, err := decodeRaw[ma.MemoryVersion](raw)
			if err != nil {
				return err
			}
			return printVersion(cmd.OutOrStdout(), v, false)
		}),
	}
}

func memDiff(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "diff STORE_ID VERSION_A VERSION_B",
		Short: "Show what changed between two memory versions (a unified diff)",
		Long: `Print a unified diff from the content of VERSION_A to that of VERSION_B (as diff -u
does; a deleted memory's version counts as empty). Nothing is printed when they
are the same. A redacted version has no content left to compare.`,
		Example: `  reins memory diff memstore_01… memver_01… memver_02… | less -R`,
		Args:    cobra.ExactArgs(3),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			var sides [2]diffSide
			for i, id := range args[1:] {
				_, v, err := getVersion(cmd.Context(), c, args[0], id)
				if err != nil {
					return err
				}
				if sides[i], err = sideOf(v, "ab"[i:i+1]); err != nil {
					return err
				}
			}
			d := unifiedDiff(sides[0].content, sides[1].content, sides[0].label, sides[1].label)
			if d == "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s and %s have the same content\n", args[1], args[2])
			}
			_, err := io.WriteString(cmd.OutOrStdout(), d)
			return err
		}),
	}
}

// diffSide is one version as a side of a diff.
type diffSide struct{ content, label string }

// sideOf is v as the side of a diff named side ("a" or "b"): its
// content, labelled with its path and id (/dev/null for a deletion).
func sideOf(v ma.MemoryVersion, side string) (diffSide, error) {
	switch {
	case v.RedactedAt != nil:
		return diffSide{}, fmt.Errorf("version %s was redacted: its content is gone, there is nothing to compare", v.ID)
	case v.Operation == ma.MemoryDeleted:
		return diffSide{label: "/dev/null\t" + v.ID}, nil
	case v.Content == nil:
		return diffSide{}, fmt.Errorf("version %s came without its content", v.ID)
	}
	return diffSide{content: *v.Content, label: side + deref(v.Path) + "\t" + v.ID}, nil
}
