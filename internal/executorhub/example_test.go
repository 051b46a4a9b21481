package executorhub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/executorhub"
	"github.com/reinsdev/reins/internal/tool"
)

// staticCredentials accepts one environment key, by its hash.
type staticCredentials struct{ keyHash, environmentID string }

func (c staticCredentials) VerifyEnvironmentKey(_ context.Context, keyHash string) (string, error) {
	if keyHash == c.keyHash {
		return c.environmentID, nil
	}
	return "", executor.ErrCredentialRejected
}

func (c staticCredentials) VerifyMachineToken(context.Context, string) (string, error) {
	return "", executor.ErrCredentialRejected
}

// A hub behind an HTTP server, a remote executor running the built-in
// tools in a workspace, and one tool call through a lease.
func Example() {
	ctx := context.Background()
	key, keyHash := executorhub.NewEnvironmentKey() // show key once, store keyHash
	hub := executorhub.NewHub(executorhub.HubOptions{
		Credentials: staticCredentials{keyHash: keyHash, environmentID: "env_1"},
	})
	srv := httptest.NewServer(hub)
	defer srv.Close()
	defer hub.Stop(ctx)

	workspace, _ := os.MkdirTemp("", "reins-example")
	defer os.RemoveAll(workspace)
	client := executor.NewClient(executor.Options{
		URL:            srv.URL,
		EnvironmentKey: key,
		Executor:       executor.ExecutorInfo{Name: "laptop"},
		Workspace:      workspace,
	})
	go client.Run(ctx)
	defer func() { client.Stop(); <-client.Done() }()

	lease, err := hub.WaitAssign(ctx, executorhub.AssignRequest{EnvironmentID: "env_1", SessionID: "sess_1", Tools: []string{"bash", "write"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(ctx)
	input, _ := json.Marshal(map[string]string{"command": "echo hello from the executor"})
	res, err := lease.CallTool(ctx, tool.Call{ID: "call_1", Name: "bash", Input: input})
	fmt.Println(res.Content[0].Text, res.IsError, err)
	// Output: hello from the executor false <nil>
}

// A cloud environment runs its tools through an in-process executor that
// speaks the same protocol over an in-memory connection.
func ExampleNewLocal() {
	ctx := context.Background()
	hub := executorhub.NewHub(executorhub.HubOptions{})
	defer hub.Stop(ctx)
	workspace, _ := os.MkdirTemp("", "reins-local")
	defer os.RemoveAll(workspace)

	local := executorhub.NewLocal(hub, executorhub.LocalOptions{EnvironmentID: "env_cloud", Workspace: workspace})
	go local.Run(ctx)
	defer func() { local.Stop(); <-local.Done() }()

	lease, err := hub.WaitAssign(ctx, executorhub.AssignRequest{EnvironmentID: "env_cloud", SessionID: "sess_2", Tools: []string{"write", "read"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(ctx)
	lease.CallTool(ctx, tool.Call{ID: "w", Name: "write", Input: json.RawMessage(`{"file_path":"notes.txt","content":"one\ntwo\n"}`)})
	res, _ := lease.CallTool(ctx, tool.Call{ID: "r", Name: "read", Input: json.RawMessage(`{"file_path":"notes.txt","view_range":[2,2]}`)})
	fmt.Print(res.Content[0].Text)
	// Output:      2	two
}
