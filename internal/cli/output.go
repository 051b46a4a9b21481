package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// rawJSONer is what every SDK response offers: the body as received.
type rawJSONer interface{ RawJSON() string }

// printJSON writes the response body as received, indented.
func printJSON(w io.Writer, v rawJSONer) error {
	return writeIndented(w, []byte(v.RawJSON()))
}

func writeIndented(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		// Not JSON after all: print it unchanged.
		buf.Reset()
		buf.Write(raw)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// decodeRaw decodes a response's raw JSON into one of the managedagents
// wire types, which the text output reads.
func decodeRaw[T any](v rawJSONer) (T, error) {
	var out T
	if err := json.Unmarshal([]byte(v.RawJSON()), &out); err != nil {
		return out, fmt.Errorf("decode response: %w", err)
	}
	return out, nil
}

// table writes rows under a header, aligned.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// fields writes "key: value" lines, aligned, skipping empty values.
func fields(w io.Writer, kv ...string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue
		}
		fmt.Fprintf(tw, "%s:\t%s\n", kv[i], kv[i+1])
	}
	return tw.Flush()
}

// nextPageHint tells the person how to fetch the next page of a list.
func nextPageHint(w io.Writer, next string) {
	if next != "" {
		fmt.Fprintf(w, "more results: repeat with --page %s\n", next)
	}
}

// orDash is s, or "-" when empty, for table cells.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// metadataString renders a metadata bag as sorted k=v pairs.
func metadataString(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// readBodyFile reads a JSON object from a file ("-" = stdin) for
// --file, so flags can be layered on top of it.
func readBodyFile(path string, stdin io.Reader) (map[string]any, error) {
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
	body := map[string]any{}
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, fmt.Errorf("--file %s: not a JSON object: %w", path, err)
	}
	return body, nil
}

// parsePairs parses repeated KEY=VALUE flags.
func parsePairs(flag string, pairs []string) (map[string]any, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]any, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s: want KEY=VALUE, got %q", flag, p)
		}
		m[k] = v
	}
	return m, nil
}
