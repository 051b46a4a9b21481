package cobra

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	cc "github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/reinsdev/reins/mcp"
)

// OmitAnnotation keeps a command and its subtree out of the binding when
// its Cobra annotation is "true", and a flag when its pflag annotation
// holds "true" (fs.SetAnnotation(name, OmitAnnotation, []string{"true"})).
const OmitAnnotation = "mcp.reins.dev/omit"

// The Cobra annotations read as MCP hints ("true" or "false"), and the
// title.
const (
	ReadOnlyHint    = "readOnlyHint"
	DestructiveHint = "destructiveHint"
	IdempotentHint  = "idempotentHint"
	OpenWorldHint   = "openWorldHint"
	TitleAnnotation = "title"
)

// Defaults of [Options].
const (
	DefaultTimeout       = 5 * time.Minute
	DefaultOutputCap     = 1 << 20
	DefaultCleanupBudget = 5 * time.Second
	DefaultTermGrace     = 2 * time.Second
	DefaultReadOnlySlots = 4
	MaxArgs              = 256
)

// Options configure a [Binding]. The zero value is usable.
type Options struct {
	// Executable is the binary each call runs. Empty means os.Executable().
	Executable string
	// Env is the child's environment. Nil means the host's.
	Env []string
	// Dir is the child's working directory. Empty means the host's.
	Dir string
	// Expose decides whether a runnable command is published. Nil
	// publishes every runnable command that is not hidden, deprecated or
	// marked with OmitAnnotation.
	Expose func(*cc.Command) bool
	// FlagFilter decides whether a flag is published. Nil publishes every
	// visible, non-deprecated flag except help and those withheld by
	// OmitFlags or OmitAnnotation.
	FlagFilter func(*cc.Command, *pflag.Flag) bool
	// OmitFlags names flags never published, on any command: the
	// connection settings, credentials and paths that are fixed when the
	// server starts and that no caller may choose. They are absent from
	// every input schema, so a call passing one fails with
	// invalid_arguments like any unknown flag. New fails when no command
	// of the tree has a flag of one of these names: a misspelt name would
	// leave the flag it meant published.
	OmitFlags []string
	// Group names an operation's group. Nil uses the parent command's name
	// (empty for children of the root).
	Group func(*cc.Command) string
	// Codecs publish custom flag types, keyed by pflag.Value.Type(). A flag
	// of an unknown type without a codec makes New fail.
	Codecs map[string]Codec
	// Slots is the number of commands that may run at once. Zero means 1.
	Slots int
	// ReadOnlySlots is the number of read-only commands (those with
	// ReadOnlyHint "true") that may run at once besides Slots: a read
	// never waits for a write, nor takes its slot. Zero means
	// DefaultReadOnlySlots.
	ReadOnlySlots int
	// Timeout bounds one execution. Zero means DefaultTimeout.
	Timeout time.Duration
	// OutputCap is the number of bytes retained per stream (head and
	// tail). Zero means DefaultOutputCap.
	OutputCap int
	// TermGrace is how long a stopped command gets between SIGTERM and
	// SIGKILL. Zero means DefaultTermGrace.
	TermGrace time.Duration
	// CleanupBudget is how long the binding waits for the command's whole
	// process group to be gone. Zero means DefaultCleanupBudget.
	CleanupBudget time.Duration
	// Logger receives private causes. Nil discards them.
	Logger *slog.Logger

	// signal delivers a signal to a process group; tests replace it.
	signal func(pgid int, sig sysSignal) error
}

// A Binding runs the commands of a Cobra tree as MCP operations.
type Binding struct {
	opts Options
	exe  string
	ops  []mcp.Operation
	// omit is the set of OmitFlags.
	omit  map[string]bool
	slots chan struct{}
	// roSlots are the slots of read-only commands.
	roSlots chan struct{}
	log     *slog.Logger

	// mu guards the fields below; finished is added to under it, after
	// closing is checked, so that closing waits for every execution.
	mu       sync.Mutex
	closing  bool
	running  map[*execution]struct{}
	leaked   []Leak
	lastErr  string
	finished sync.WaitGroup
}

// New walks root and returns a binding for its exposed commands. It fails
// when a published flag has a type without a codec, naming the command,
// the flag and the type.
func New(root *cc.Command, opts Options) (*Binding, error) {
	if opts.Slots <= 0 {
		opts.Slots = 1
	}
	if opts.ReadOnlySlots <= 0 {
		opts.ReadOnlySlots = DefaultReadOnlySlots
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.OutputCap <= 0 {
		opts.OutputCap = DefaultOutputCap
	}
	if opts.TermGrace <= 0 {
		opts.TermGrace = DefaultTermGrace
	}
	if opts.CleanupBudget <= 0 {
		opts.CleanupBudget = DefaultCleanupBudget
	}
	if opts.signal == nil {
		opts.signal = signalGroup
	}
	b := &Binding{opts: opts, slots: make(chan struct{}, opts.Slots), roSlots: make(chan struct{}, opts.ReadOnlySlots), running: map[*execution]struct{}{}, log: opts.Logger}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.exe = opts.Executable
	if b.exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("mcpcobra: locating the executable: %w", err)
		}
		b.exe = exe
	}
	if err := b.withhold(root); err != nil {
		return nil, err
	}
	kinds := builtinKinds()
	for name, c := range opts.Codecs {
		kinds[name] = flagKind{schema: string(c.Schema), encode: c.Encode}
	}
	var walk func(cmd *cc.Command) error
	walk = func(cmd *cc.Command) error {
		if !b.exposed(root, cmd) {
			return nil
		}
		if cmd.Runnable() && b.expose(cmd) {
			op, err := b.operation(root, cmd, kinds)
			if err != nil {
				return err
			}
			b.ops = append(b.ops, op)
		}
		for _, sub := range cmd.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	return b, nil
}

// exposed reports whether cmd and its subtree may be published at all.
func (b *Binding) exposed(root, cmd *cc.Command) bool {
	if cmd.Hidden || cmd.Deprecated != "" || cmd.Annotations[OmitAnnotation] == "true" {
		return false
	}
	if cmd != root && cmd.Parent() == root && (cmd.Name() == "help" || cmd.Name() == "completion") {
		return false
	}
	return true
}

// withhold records OmitFlags, each of which must name a flag of some
// command of root's tree.
func (b *Binding) withhold(root *cc.Command) error {
	b.omit = map[string]bool{}
	for _, name := range b.opts.OmitFlags {
		b.omit[name] = false
	}
	var walk func(cmd *cc.Command)
	walk = func(cmd *cc.Command) {
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if _, ok := b.omit[f.Name]; ok {
				b.omit[f.Name] = true
			}
		})
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for _, name := range b.opts.OmitFlags {
		if !b.omit[name] {
			return fmt.Errorf("mcpcobra: OmitFlags names --%s, which no command of %q has", name, root.Name())
		}
	}
	return nil
}

// publishes reports whether cmd's flag f is offered to callers.
func (b *Binding) publishes(cmd *cc.Command, f *pflag.Flag) bool {
	return published(f) && !b.omit[f.Name] && (b.opts.FlagFilter == nil || b.opts.FlagFilter(cmd, f))
}

func (b *Binding) expose(cmd *cc.Command) bool {
	return b.opts.Expose == nil || b.opts.Expose(cmd)
}

// Operations returns the operations of the exposed commands, for
// [mcp.Server.Add].
func (b *Binding) Operations() []mcp.Operation { return slices.Clone(b.ops) }

// boundFlag is one published flag of an operation.
type boundFlag struct {
	name   string
	encode func(json.RawMessage) ([]string, error)
}

// operation builds the operation of cmd.
func (b *Binding) operation(root, cmd *cc.Command, kinds map[string]flagKind) (mcp.Operation, error) {
	var path []string
	for c := cmd; c != root; c = c.Parent() {
		path = append([]string{c.Name()}, path...)
	}
	name := strings.Join(append([]string{root.Name()}, path...), "_")
	props := map[string]json.RawMessage{}
	flags := map[string]boundFlag{}
	var err error
	visit := func(f *pflag.Flag) {
		if err != nil || !b.publishes(cmd, f) {
			return
		}
		k, ok := kinds[f.Value.Type()]
		if !ok {
			err = fmt.Errorf("mcpcobra: command %q: flag --%s has type %q with no registered codec",
				cmd.CommandPath(), f.Name, f.Value.Type())
			return
		}
		schema := k.schema
		if f.Usage != "" {
			var m map[string]any
			if json.Unmarshal([]byte(schema), &m) == nil {
				m["description"] = f.Usage
				raw, _ := json.Marshal(m)
				schema = string(raw)
			}
		}
		props[f.Name] = json.RawMessage(schema)
		flags[f.Name] = boundFlag{name: f.Name, encode: k.encode}
	}
	cmd.LocalFlags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	if err != nil {
		return mcp.Operation{}, err
	}
	flagSchema, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "additionalProperties": false})
	input := fmt.Sprintf(`{"type":"object","properties":{"flags":%s,"args":{"type":"array","items":{"type":"string"},"maxItems":%d}},"additionalProperties":false}`,
		flagSchema, MaxArgs)
	group := ""
	switch {
	case b.opts.Group != nil:
		group = b.opts.Group(cmd)
	case cmd.Parent() != nil && cmd.Parent() != root:
		group = cmd.Parent().Name()
	}
	desc := cmd.Short
	if cmd.Long != "" {
		desc = cmd.Long
	}
	if cmd.Use != "" {
		desc = strings.TrimSpace(desc + "\n\nUsage: " + cmd.UseLine())
	}
	a := cmd.Annotations
	readOnly := a[ReadOnlyHint] == "true"
	return mcp.Operation{
		Name:        name,
		Group:       group,
		Title:       a[TitleAnnotation],
		Description: desc,
		InputSchema: json.RawMessage(input),
		OutputSchema: json.RawMessage(`{"type":"object","required":["stdout","stderr","exitCode"],"properties":{` +
			`"stdout":{"type":"string"},"stderr":{"type":"string"},"exitCode":{"type":"integer"},"truncated":{"type":"boolean"}}}`),
		Annotations: mcp.Annotations{
			ReadOnly:    readOnly,
			Destructive: hint(a[DestructiveHint]),
			Idempotent:  a[IdempotentHint] == "true",
			OpenWorld:   hint(a[OpenWorldHint]),
		},
		Timeout: b.opts.Timeout + b.opts.TermGrace + b.opts.CleanupBudget,
		Handler: b.handler(path, flags, readOnly),
	}, nil
}

func hint(v string) *bool {
	switch v {
	case "true":
		t := true
		return &t
	case "false":
		f := false
		return &f
	}
	return nil
}

// argv builds the child's command line: the command path, the flags as
// --name=value in name order, "--", then the positional arguments.
func argv(path []string, flags map[string]boundFlag, in input) ([]string, error) {
	out := slices.Clone(path)
	names := make([]string, 0, len(in.Flags))
	for n := range in.Flags {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		f, ok := flags[n]
		if !ok {
			return nil, mcp.NewFailure(mcp.CodeInvalidArguments, fmt.Sprintf("the command does not accept the flag %q", n), nil)
		}
		vals, err := f.encode(in.Flags[n])
		if err != nil {
			return nil, mcp.NewFailure(mcp.CodeInvalidArguments, fmt.Sprintf("flag %q: %v", n, err), err)
		}
		for _, v := range vals {
			out = append(out, "--"+n+"="+v)
		}
	}
	out = append(out, "--")
	out = append(out, in.Args...)
	for _, a := range out {
		if strings.ContainsRune(a, 0) {
			return nil, mcp.NewFailure(mcp.CodeInvalidArguments, "a value holds a NUL byte, which the command line cannot carry", nil)
		}
	}
	return out, nil
}

// input is the decoded input of an operation.
type input struct {
	Flags map[string]json.RawMessage `json:"flags"`
	Args  []string                   `json:"args"`
}

func (b *Binding) handler(path []string, flags map[string]boundFlag, readOnly bool) mcp.Handler {
	return func(ctx context.Context, call *mcp.Call) (*mcp.Result, error) {
		var in input
		if err := json.Unmarshal(call.Arguments, &in); err != nil {
			return nil, mcp.NewFailure(mcp.CodeInvalidArguments, "arguments must be {flags, args}", err)
		}
		args, err := argv(path, flags, in)
		if err != nil {
			return nil, err
		}
		slots := b.slots
		if readOnly {
			slots = b.roSlots
		}
		return b.execute(ctx, call.Operation, args, slots)
	}
}
