package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// byID builds a command that takes one id, calls the API with it and
// prints the answer (get, archive and delete of agents, environments and
// sessions).
func byID[T rawJSONer](cf *clientFlags, use, short string,
	call func(ctx context.Context, c *apiClient, id string) (T, error),
	print func(w io.Writer, output string, v rawJSONer) error,
) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			v, err := call(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			return print(cmd.OutOrStdout(), c.output, v)
		}),
	}
}

// printDeleted prints the answer to a delete: the body with -o json, else
// one line.
func printDeleted(w io.Writer, output string, v rawJSONer) error {
	if output == outputJSON {
		return printJSON(w, v)
	}
	d, err := decodeRaw[struct {
		ID string `json:"id"`
	}](v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "deleted %s\n", d.ID)
	return err
}
