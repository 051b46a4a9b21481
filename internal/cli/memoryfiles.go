package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/spf13/cobra"
)

// memoryItem is an item of a memory list: a memory (content left out)
// or a memory_prefix standing for a folder. raw is the item as received.
type memoryItem struct {
	Type             string `json:"type"`
	ID               string `json:"id"`
	Path             string `json:"path"`
	ContentSizeBytes int64  `json:"content_size_bytes"`
	UpdatedAt        string `json:"updated_at"`
	raw              json.RawMessage
}

// listMemories lists the memories below prefix (a path ending with "/"),
// every page of them, or with depth 1 the direct children only.
func listMemories(ctx context.Context, c *apiClient, storeID, prefix string, depth int64) ([]memoryItem, error) {
	var items []memoryItem
	p := anthropic.BetaMemoryStoreMemoryListParams{Limit: anthropic.Int(100), PathPrefix: anthropic.String(prefix)}
	if depth > 0 {
		p.Depth = anthropic.Int(depth)
	}
	for {
		page, err := c.Beta.MemoryStores.Memories.List(ctx, storeID, p)
		if err != nil {
			return nil, err
		}
		var body struct {
			Data     []json.RawMessage `json:"data"`
			NextPage string            `json:"next_page"`
		}
		if err := json.Unmarshal([]byte(page.RawJSON()), &body); err != nil {
			return nil, fmt.Errorf("decode response: %w", err)
		}
		for _, raw := range body.Data {
			it := memoryItem{raw: raw}
			if err := json.Unmarshal(raw, &it); err != nil {
				return nil, fmt.Errorf("decode response: %w", err)
			}
			items = append(items, it)
		}
		if body.NextPage == "" || len(body.Data) == 0 {
			return items, nil
		}
		p.Page = anthropic.String(body.NextPage)
	}
}

// errNoMemory says no memory has the path asked for.
var errNoMemory = errors.New("no memory")

// memoryID resolves a memory argument: an id (mem_…) is used as is; a
// path (/…) is looked up among its folder's direct children. A path
// nothing is at is errNoMemory.
func memoryID(ctx context.Context, c *apiClient, storeID, arg string) (string, error) {
	if !strings.HasPrefix(arg, "/") {
		return arg, nil
	}
	folder := arg[:strings.LastIndex(arg, "/")+1]
	items, err := listMemories(ctx, c, storeID, folder, 1)
	if err != nil {
		return "", err
	}
	for _, it := range items {
		switch {
		case it.Type == "memory" && it.Path == arg:
			return it.ID, nil
		case it.Type == "memory_prefix" && it.Path == arg+"/":
			return "", fmt.Errorf("%s is a folder in %s, not a memory; list it with `reins memory ls %s --prefix %s/`", arg, storeID, storeID, arg)
		}
	}
	return "", fmt.Errorf("%w at %s in %s", errNoMemory, arg, storeID)
}

func memLs(cf *clientFlags) *cobra.Command {
	var prefix string
	var depth int
	cmd := &cobra.Command{
		Use:   "ls STORE_ID [--prefix /folder/] [--depth N]",
		Short: "Show a store's memories as a tree",
		Long: `Show a store's memories (or those below --prefix) as a tree, with their sizes.
--depth N shows N levels and rolls deeper folders up into one line each with
their count; 0 shows every level. -o json prints the same items: memories,
and memory_prefix items for the folders rolled up.`,
		Example: `  reins memory ls memstore_01…
  reins memory ls memstore_01… --prefix /projects/ --depth 1`,
		Args: cobra.ExactArgs(1),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			if depth < 0 {
				return fmt.Errorf("--depth: want 0 (every level) or more, got %d", depth)
			}
			if !strings.HasPrefix(prefix, "/") {
				return fmt.Errorf("--prefix: a folder path starts with /, got %q", prefix)
			}
			if !strings.HasSuffix(prefix, "/") {
				prefix += "/"
			}
			items, err := listMemories(cmd.Context(), c, args[0], prefix, 0)
			if err != nil {
				return err
			}
			root := buildTree(items, prefix, depth)
			if c.output == outputJSON {
				return printTreeJSON(cmd.OutOrStdout(), root)
			}
			return printTree(cmd.OutOrStdout(), root)
		}),
	}
	cmd.Flags().StringVar(&prefix, "prefix", "/", "the folder to show (a path ending with /)")
	cmd.Flags().IntVar(&depth, "depth", 0, "levels to show (0: all); deeper folders are rolled up")
	return cmd
}

// treeNode is a folder or a memory of a tree view.
type treeNode struct {
	name     string
	path     string
	memory   *memoryItem
	children map[string]*treeNode
	// count and size are the memories below a folder and their bytes.
	count  int
	size   int64
	rolled bool
}

// buildTree builds the tree of the memories below prefix, folders below
// depth levels rolled up (depth 0: none).
func buildTree(items []memoryItem, prefix string, depth int) *treeNode {
	root := &treeNode{name: prefix, path: prefix, children: map[string]*treeNode{}}
	for i := range items {
		if it := &items[i]; it.Type == "memory" {
			root.add(it, strings.Split(strings.TrimPrefix(it.Path, prefix), "/"), depth)
		}
	}
	return root
}

// add puts the memory it in the folder n, parts being its path below n:
// in the folders its path names (made as needed, rolled up from depth
// levels below the root), counted in each.
func (n *treeNode) add(it *memoryItem, parts []string, depth int) {
	n.count++
	n.size += it.ContentSizeBytes
	for level, part := range parts[:len(parts)-1] {
		child := n.children[part+"/"]
		if child == nil {
			child = &treeNode{name: part + "/", path: n.path + part + "/", children: map[string]*treeNode{},
				rolled: depth > 0 && level+1 >= depth}
			n.children[part+"/"] = child
		}
		n = child
		n.count++
		n.size += it.ContentSizeBytes
		if n.rolled {
			return
		}
	}
	last := parts[len(parts)-1]
	n.children[last] = &treeNode{name: last, path: it.Path, memory: it}
}

// sorted returns a folder's children in path order.
func (n *treeNode) sorted() []*treeNode {
	out := make([]*treeNode, 0, len(n.children))
	for _, c := range n.children {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// printTree writes the tree with box-drawing lines, then the totals.
func printTree(w io.Writer, root *treeNode) error {
	var b strings.Builder
	b.WriteString(root.path + "\n")
	folders := writeChildren(&b, root, "")
	fmt.Fprintf(&b, "\n%s, %s, %s\n", plural(folders, "folder"), plural(root.count, "memory"), byteSize(root.size))
	_, err := io.WriteString(w, b.String())
	return err
}

// writeChildren writes n's children under indent and returns the number
// of folders written.
func writeChildren(b *strings.Builder, n *treeNode, indent string) int {
	folders := 0
	kids := n.sorted()
	for i, c := range kids {
		branch, next := "├── ", "│   "
		if i == len(kids)-1 {
			branch, next = "└── ", "    "
		}
		switch {
		case c.memory != nil:
			fmt.Fprintf(b, "%s%s%s  %s\n", indent, branch, c.name, byteSize(c.memory.ContentSizeBytes))
		case c.rolled:
			folders++
			fmt.Fprintf(b, "%s%s%s  … %s, %s\n", indent, branch, c.name, plural(c.count, "memory"), byteSize(c.size))
		default:
			folders++
			fmt.Fprintf(b, "%s%s%s\n", indent, branch, c.name)
			folders += writeChildren(b, c, indent+next)
		}
	}
	return folders
}

// printTreeJSON writes {"data": […]}: the memories shown, as received, and
// a memory_prefix item for each folder rolled up, in path order.
func printTreeJSON(w io.Writer, root *treeNode) error {
	data := []json.RawMessage{}
	var walk func(n *treeNode)
	walk = func(n *treeNode) {
		for _, c := range n.sorted() {
			switch {
			case c.memory != nil:
				data = append(data, c.memory.raw)
			case c.rolled:
				raw, _ := json.Marshal(map[string]string{"type": "memory_prefix", "path": c.path})
				data = append(data, raw)
			default:
				walk(c)
			}
		}
	}
	walk(root)
	raw, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return err
	}
	return writeIndented(w, raw)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	if strings.HasSuffix(what, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(what, "y"))
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// byteSize is n bytes for a person: 812 B, 4.2 kB.
func byteSize(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f kB", float64(n)/1000)
}

func memCat(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "cat STORE_ID PATH|MEMORY_ID",
		Short:   "Print a memory's content",
		Long:    "Print a memory's content as stored (-o json: the memory with its content, id, hash and version).",
		Example: `  reins memory cat memstore_01… /style.md`,
		Args:    cobra.ExactArgs(2),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			id, err := memoryID(cmd.Context(), c, args[0], args[1])
			if err != nil {
				return err
			}
			m, err := c.Beta.MemoryStores.Memories.Get(cmd.Context(), id, anthropic.BetaMemoryStoreMemoryGetParams{
				MemoryStoreID: args[0], View: anthropic.BetaManagedAgentsMemoryViewFull})
			if err != nil {
				return err
			}
			if c.output == outputJSON {
				return printJSON(cmd.OutOrStdout(), m)
			}
			_, err = io.WriteString(cmd.OutOrStdout(), m.Content)
			return err
		}),
	}
}

func memPut(cf *clientFlags) *cobra.Command {
	var file, ifSHA string
	cmd := &cobra.Command{
		Use:   "put STORE_ID PATH|MEMORY_ID [--file FILE] [--if-sha256 SHA256]",
		Short: "Write a memory: create it, or replace its content",
		Long: `Write a memory's content, read from --file or stdin: the memory at PATH is
created, or its content replaced. With --if-sha256 the memory must exist and
its current content have that SHA-256 (from cat -o json or versions), else
nothing is written (409 memory_precondition_failed_error).`,
		Example: `  reins memory put memstore_01… /style.md --file style.md
  echo "Answer briefly." | reins memory put memstore_01… /style.md --if-sha256 9f86d0…`,
		Args: cobra.ExactArgs(2),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			if (file == "" || file == "-") && isTerminal(cmd.InOrStdin()) {
				fmt.Fprintln(cmd.ErrOrStderr(), "reading the content from the terminal; end it with Ctrl-D (or give --file)")
			}
			content, err := readContent(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			m, created, err := putMemory(cmd.Context(), c, args[0], args[1], content, ifSHA)
			if err != nil {
				return err
			}
			if c.output == outputJSON {
				return printJSON(cmd.OutOrStdout(), m)
			}
			verb := "updated"
			if created {
				verb = "created"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s (%s, %s, sha256 %s, version %s)\n", verb, m.Path, m.ID,
				byteSize(m.ContentSizeBytes), m.ContentSha256, m.MemoryVersionID)
			return err
		}),
	}
	cmd.Flags().StringVar(&file, "file", "", "read the content from this file (default, or -: stdin)")
	cmd.Flags().StringVar(&ifSHA, "if-sha256", "", "write only if the memory's current content has this SHA-256")
	return cmd
}

// readContent reads a memory's content from file, or stdin for "" or "-".
func readContent(file string, stdin io.Reader) (string, error) {
	var b []byte
	var err error
	if file == "" || file == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return "", fmt.Errorf("read the content: %w", err)
	}
	return string(b), nil
}

// putMemory replaces the content of the memory arg names, or creates it
// at that path when there is none (not with ifSHA, which checks an
// existing memory).
func putMemory(ctx context.Context, c *apiClient, storeID, arg, content, ifSHA string) (*anthropic.BetaManagedAgentsMemory, bool, error) {
	id, err := memoryID(ctx, c, storeID, arg)
	switch {
	case errors.Is(err, errNoMemory) && ifSHA != "":
		return nil, false, fmt.Errorf("%w; --if-sha256 checks the content of an existing memory", err)
	case errors.Is(err, errNoMemory):
		m, err := c.Beta.MemoryStores.Memories.New(ctx, storeID, anthropic.BetaMemoryStoreMemoryNewParams{
			Path: arg, Content: anthropic.String(content)})
		return m, true, err
	case err != nil:
		return nil, false, err
	}
	p := anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: storeID, Content: anthropic.String(content)}
	if ifSHA != "" {
		p.Precondition = anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: anthropic.String(ifSHA)}
	}
	m, err := c.Beta.MemoryStores.Memories.Update(ctx, id, p)
	return m, false, err
}

func memRm(cf *clientFlags) *cobra.Command {
	var ifSHA string
	cmd := &cobra.Command{
		Use:     "rm STORE_ID PATH|MEMORY_ID [--if-sha256 SHA256]",
		Short:   "Delete a memory (its versions stay)",
		Example: `  reins memory rm memstore_01… /old-notes.md`,
		Args:    cobra.ExactArgs(2),
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			id, err := memoryID(cmd.Context(), c, args[0], args[1])
			if err != nil {
				return err
			}
			p := anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: args[0]}
			if ifSHA != "" {
				p.ExpectedContentSha256 = anthropic.String(ifSHA)
			}
			d, err := c.Beta.MemoryStores.Memories.Delete(cmd.Context(), id, p)
			if err != nil {
				return err
			}
			return printDeleted(cmd.OutOrStdout(), c.output, d)
		}),
	}
	cmd.Flags().StringVar(&ifSHA, "if-sha256", "", "delete only if the memory's current content has this SHA-256")
	return cmd
}
