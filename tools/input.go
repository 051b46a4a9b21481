package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// BashInput is the input of the bash tool.
type BashInput struct {
	Command   string `json:"command"`
	Restart   bool   `json:"restart,omitempty"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// ReadInput is the input of the read tool. ViewRange is [start, end] in
// 1-based lines, both inclusive; end -1 reads to the end of the file.
type ReadInput struct {
	FilePath  string `json:"file_path"`
	ViewRange []int  `json:"view_range,omitempty"`
}

// WriteInput is the input of the write tool.
type WriteInput struct {
	FilePath string `json:"file_path"`
	Content  string `json:"content"`
}

// EditInput is the input of the edit tool.
type EditInput struct {
	FilePath   string `json:"file_path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all,omitempty"`
}

// GlobInput is the input of the glob tool.
type GlobInput struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path,omitempty"`
}

// GrepInput is the input of the grep tool.
type GrepInput struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path,omitempty"`
}

// Mutating reports whether the tool name may change the workspace, the
// calls a person is asked to confirm.
func Mutating(name string) bool {
	return name == "bash" || name == "write" || name == "edit"
}

// DecodeInput decodes and validates the JSON input of the built-in tool
// name. It returns a pointer to the tool's input struct, or an *Error with
// code "invalid_input" (or "unknown_tool").
func DecodeInput(name string, raw json.RawMessage) (any, error) {
	var in interface{ validate() error }
	switch name {
	case "bash":
		in = new(BashInput)
	case "read":
		in = new(ReadInput)
	case "write":
		in = new(WriteInput)
	case "edit":
		in = new(EditInput)
	case "glob":
		in = new(GlobInput)
	case "grep":
		in = new(GrepInput)
	default:
		return nil, errorf(CodeUnknownTool, "unknown tool %q", name)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errorf(CodeInvalidInput, "%s: input must be a JSON object", name)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(in); err != nil {
		return nil, &Error{Code: CodeInvalidInput, Msg: name + ": invalid input", Err: err}
	}
	if dec.More() {
		return nil, errorf(CodeInvalidInput, "%s: trailing data after the input object", name)
	}
	if err := in.validate(); err != nil {
		return nil, &Error{Code: CodeInvalidInput, Msg: name + ": invalid input", Err: err}
	}
	return in, nil
}

func (in *BashInput) validate() error {
	if in.Command == "" && !in.Restart {
		return fmt.Errorf("command is required")
	}
	if in.TimeoutMS < 0 {
		return fmt.Errorf("timeout_ms must not be negative")
	}
	return nil
}

func (in *ReadInput) validate() error {
	if in.FilePath == "" {
		return fmt.Errorf("file_path is required")
	}
	if in.ViewRange != nil {
		if len(in.ViewRange) != 2 {
			return fmt.Errorf("view_range must be [start, end]")
		}
		s, e := in.ViewRange[0], in.ViewRange[1]
		if s < 1 || (e != -1 && e < s) {
			return fmt.Errorf("view_range [%d, %d] is not a valid line range", s, e)
		}
	}
	return nil
}

func (in *WriteInput) validate() error {
	if in.FilePath == "" {
		return fmt.Errorf("file_path is required")
	}
	return nil
}

func (in *EditInput) validate() error {
	if in.FilePath == "" {
		return fmt.Errorf("file_path is required")
	}
	if in.OldString == "" {
		return fmt.Errorf("old_string must not be empty")
	}
	if in.OldString == in.NewString {
		return fmt.Errorf("old_string and new_string are the same")
	}
	return nil
}

func (in *GlobInput) validate() error {
	if in.Pattern == "" {
		return fmt.Errorf("pattern is required")
	}
	return nil
}

func (in *GrepInput) validate() error {
	if in.Pattern == "" {
		return fmt.Errorf("pattern is required")
	}
	return nil
}
