package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/reinsdev/reins/tools"
)

// Tool calls run over a workspace; paths outside it are refused.
func ExampleSession_Call() {
	dir, _ := os.MkdirTemp("", "ws")
	defer os.RemoveAll(dir)
	w, _ := tools.OpenWorkspace(dir, tools.WorkspaceOptions{})
	defer w.Close()
	s := tools.NewSession(w)
	defer s.Close()
	ctx := context.Background()

	s.Call(ctx, "write", json.RawMessage(`{"file_path":"hello.txt","content":"hello\nworld\n"}`))
	s.Call(ctx, "edit", json.RawMessage(`{"file_path":"hello.txt","old_string":"world","new_string":"reins"}`))
	fmt.Print(s.Call(ctx, "read", json.RawMessage(`{"file_path":"hello.txt"}`)).Text())

	r := s.Call(ctx, "read", json.RawMessage(`{"file_path":"../../etc/passwd"}`))
	fmt.Println(r.IsError, r.ErrorCode)
	// Output:
	//      1	hello
	//      2	reins
	// true workspace_boundary
}

// A read-only workspace refuses mutation.
func ExampleWorkspaceOptions_readOnly() {
	dir, _ := os.MkdirTemp("", "ws")
	defer os.RemoveAll(dir)
	w, _ := tools.OpenWorkspace(dir, tools.WorkspaceOptions{ReadOnly: true})
	defer w.Close()
	s := tools.NewSession(w)
	defer s.Close()
	r := s.Call(context.Background(), "write", json.RawMessage(`{"file_path":"a.txt","content":"x"}`))
	fmt.Println(r.ErrorCode)
	// Output: workspace_read_only
}
