package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/spf13/cobra"

	ma "github.com/reinsdev/reins/managedagents"
)

func newDreamsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "dreams",
		Aliases: []string{"dream"},
		Short:   "Run dreams: jobs that rewrite a memory store from past sessions",
		Long: `A dream reads a memory store and the transcripts of 1 to 100 sessions, then writes a
reorganized version of the store: into a new store (the default) or into the
input store itself (--update-existing). It runs as a session of reins's built-in
dream agent; ` + "`reins dreams watch`" + ` follows it. See docs/dreams.md.`,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(dreamsList(cf), dreamsCreate(cf), dreamsGet(cf), dreamsCancel(cf), dreamsArchive(cf), dreamsWatch(cf))
	return cmd
}

func dreamsList(cf *clientFlags) *cobra.Command {
	var lf listFlags
	var statuses []string
	cmd := &cobra.Command{
		Use:   "list [--status S ...] [--include-archived]",
		Short: "List dreams (newest first)",
		Args:  cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			p := anthropic.BetaDreamListParams{}
			p.Limit, p.Page, p.IncludeArchived = lf.opts()
			for _, s := range statuses {
				p.Statuses = append(p.Statuses, anthropic.BetaDreamStatus(s))
			}
			page, err := c.Beta.Dreams.List(cmd.Context(), p)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if c.output == outputJSON {
				return printJSON(w, page)
			}
			dreams, err := decodeRaw[ma.Page[ma.Dream]](page)
			if err != nil {
				return err
			}
			t := newTable(w, "ID", "STATUS", "MEMORY STORE", "SESSIONS", "OUTPUT", "SESSION", "CREATED")
			for _, d := range dreams.Data {
				t.row(d.ID, dreamStatus(&d), d.MemoryStoreInput(), fmt.Sprint(len(d.SessionInputs())),
					orDash(dreamOutput(&d)), orDash(deref(d.SessionID)), d.CreatedAt)
			}
			if err := t.flush(); err != nil {
				return err
			}
			nextPageHint(cmd.ErrOrStderr(), deref(dreams.NextPage))
			return nil
		}),
	}
	lf.register(cmd, true)
	cmd.Flags().StringArrayVar(&statuses, "status", nil, "only dreams in this status: "+strings.Join(ma.DreamStatuses, ", ")+" (repeatable)")
	return cmd
}

// dreamFields are the flags of `dreams create`.
type dreamFields struct {
	store          string
	sessions       []string
	model          string
	instructions   string
	updateExisting bool
}

// params builds the create request. A leading @ of --instructions names
// a file (@- stdin); @@ stands for a leading @.
func (f *dreamFields) params(stdin io.Reader) (anthropic.BetaDreamNewParams, error) {
	var p anthropic.BetaDreamNewParams
	if len(f.sessions) == 0 {
		return p, errors.New("--session is required: give the sessions the dream reads (1 to 100), each with --session")
	}
	p.Inputs = []anthropic.BetaDreamInputUnionParam{
		anthropic.BetaDreamInputParamOfMemoryStore(f.store),
		anthropic.BetaDreamInputParamOfSessions(f.sessions),
	}
	p.Model = anthropic.BetaDreamNewParamsModelUnion{OfString: anthropic.String(f.model)}
	if f.instructions != "" {
		text, err := readInstructions(f.instructions, stdin)
		if err != nil {
			return p, err
		}
		p.Instructions = anthropic.String(text)
	}
	if f.updateExisting {
		p.OutputBehavior = anthropic.BetaOutputBehaviorParamOfUpdateExisting(f.store)
	}
	return p, nil
}

// readInstructions resolves --instructions: TEXT, @FILE, @- (stdin) or
// @@TEXT (TEXT starting with @).
func readInstructions(v string, stdin io.Reader) (string, error) {
	switch {
	case strings.HasPrefix(v, "@@"):
		return v[1:], nil
	case v == "@-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return "", fmt.Errorf("--instructions: read stdin: %w", err)
		}
		return string(b), nil
	case strings.HasPrefix(v, "@"):
		b, err := os.ReadFile(v[1:])
		if err != nil {
			return "", fmt.Errorf("--instructions: %w (a value starting with @ names a file; write @@ for a leading @)", err)
		}
		return string(b), nil
	}
	return v, nil
}

func dreamsCreate(cf *clientFlags) *cobra.Command {
	var f dreamFields
	cmd := &cobra.Command{
		Use:   "create --store MEMSTORE_ID --session SESSION_ID [--session ...] --model MODEL [flags]",
		Short: "Start a dream over a memory store and past sessions",
		Long: `Start a dream: it reads the memory store and the sessions' transcripts, and writes a
reorganized store — a new one (the default, the input store is left as it was)
or, with --update-existing, the input store itself. The dream starts pending;
follow it with ` + "`reins dreams watch`" + `.`,
		Example: `  reins dreams create --store memstore_01… --session sesn_01… --session sesn_02… --model claude-sonnet-4-6
  reins dreams create --store memstore_01… --session sesn_01… --model claude-sonnet-4-6 \
      --instructions @steer.md --update-existing`,
		Args: cobra.NoArgs,
		RunE: cf.withClient(func(cmd *cobra.Command, _ []string, c *apiClient) error {
			p, err := f.params(cmd.InOrStdin())
			if err != nil {
				return err
			}
			d, err := c.Beta.Dreams.New(cmd.Context(), p)
			if err != nil {
				return err
			}
			if c.output != outputJSON {
				fmt.Fprintf(cmd.ErrOrStderr(), "follow it with: reins dreams watch %s\n", d.ID)
			}
			return printDream(cmd.OutOrStdout(), c.output, d)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.store, "store", "", "the memory store the dream reads (memstore_…)")
	fl.StringArrayVar(&f.sessions, "session", nil, "a session whose transcript the dream reads (repeatable, 1 to 100)")
	fl.StringVar(&f.model, "model", "", "the model that runs the dream, as an agent's (e.g. claude-sonnet-4-6)")
	fl.StringVar(&f.instructions, "instructions", "", "what to steer the dream with (up to 4,096 characters): TEXT, @FILE, @- for stdin, or @@TEXT for TEXT starting with @")
	fl.BoolVar(&f.updateExisting, "update-existing", false, "write the result into the input store instead of a new one")
	_ = cmd.MarkFlagRequired("store")
	_ = cmd.MarkFlagRequired("model")
	return cmd
}

func dreamsGet(cf *clientFlags) *cobra.Command {
	return byID(cf, "get DREAM_ID", "Show a dream (archived ones too)", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaDream, error) {
		return c.Beta.Dreams.Get(ctx, id, anthropic.BetaDreamGetParams{})
	}, printDream)
}

func dreamsCancel(cf *clientFlags) *cobra.Command {
	return byID(cf, "cancel DREAM_ID", "Cancel a pending or running dream (its session is interrupted)", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaDream, error) {
		return c.Beta.Dreams.Cancel(ctx, id, anthropic.BetaDreamCancelParams{})
	}, printDream)
}

func dreamsArchive(cf *clientFlags) *cobra.Command {
	return byID(cf, "archive DREAM_ID", "Archive a completed, failed or canceled dream (hidden from the list, for good)", func(ctx context.Context, c *apiClient, id string) (*anthropic.BetaDream, error) {
		return c.Beta.Dreams.Archive(ctx, id, anthropic.BetaDreamArchiveParams{})
	}, printDream)
}

// dreamStatus is a dream's status, marked when archived.
func dreamStatus(d *ma.Dream) string {
	if d.ArchivedAt != nil {
		return d.Status + " (archived)"
	}
	return d.Status
}

// dreamOutput is the id of the store a dream writes, once known.
func dreamOutput(d *ma.Dream) string {
	if len(d.Outputs) > 0 {
		return d.Outputs[0].MemoryStoreID
	}
	return ""
}

func printDream(w io.Writer, output string, v rawJSONer) error {
	if output == outputJSON {
		return printJSON(w, v)
	}
	d, err := decodeRaw[ma.Dream](v)
	if err != nil {
		return err
	}
	var dreamErr string
	if d.Error != nil {
		dreamErr = d.Error.Type + ": " + d.Error.Message
	}
	model := d.Model.ID
	if d.Model.Speed != "" {
		model += " (" + d.Model.Speed + ")"
	}
	u := d.Usage
	return fields(w,
		"id", d.ID,
		"status", d.Status,
		"memory store", d.MemoryStoreInput(),
		"sessions", strings.Join(d.SessionInputs(), ", "),
		"output behavior", d.OutputBehavior.Type,
		"output store", dreamOutput(&d),
		"session", deref(d.SessionID),
		"model", model,
		"instructions", oneLine(deref(d.Instructions), 120),
		"usage", fmt.Sprintf("%d input tokens, %d output tokens, %d cache read, %d cache write",
			u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens),
		"error", dreamErr,
		"created", d.CreatedAt,
		"ended", deref(d.EndedAt),
		"archived", deref(d.ArchivedAt),
	)
}
