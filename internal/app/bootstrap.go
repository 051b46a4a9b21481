package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// KeyFile is where a generated first API key is kept (mode 0600).
const KeyFile = "api-key"

// EnsureKey makes a first API key when the store has none and no bootstrap
// key is configured. It returns the new key ("" when none was made) and the
// file it was written to.
func (a *App) EnsureKey(ctx context.Context, dataDir string, bootstrap string) (key, path string, err error) {
	keys, err := a.Store.ListAPIKeys(ctx)
	if err != nil {
		return "", "", err
	}
	for _, k := range keys {
		if k.RevokedAt == nil {
			return "", "", nil
		}
	}
	if bootstrap != "" {
		return "", "", nil
	}
	key, _, err = httpapi.CreateKey(ctx, a.Store, "first key")
	if err != nil {
		return "", "", err
	}
	path = filepath.Join(dataDir, KeyFile)
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("write %s: %w", path, err)
	}
	return key, path, nil
}

// Demo names the seeded demo resources.
type Demo struct {
	AgentID, EnvironmentID, Model string
}

// SeedDemo creates a demo agent and a cloud environment when the store has
// no agent and no environment. It returns nil when nothing was seeded.
func (a *App) SeedDemo(ctx context.Context, modelID string) (*Demo, error) {
	agents, err := a.Store.ListAgents(ctx, store.ListQuery{Limit: 1, IncludeArchived: true})
	if err != nil {
		return nil, err
	}
	envs, err := a.Store.ListEnvironments(ctx, store.ListQuery{Limit: 1, IncludeArchived: true})
	if err != nil {
		return nil, err
	}
	if len(agents) > 0 || len(envs) > 0 {
		return nil, nil
	}
	now := ma.Time(time.Now())
	env := ma.Environment{ID: ids.New(ids.Environment), Type: "environment", Name: "demo", Description: "A cloud environment seeded at first start.",
		Config: ma.EnvironmentConfig{Type: ma.EnvCloud, Networking: &ma.Networking{Type: "unrestricted"},
			Packages: &ma.Packages{Type: "packages", Apt: []string{}, Cargo: []string{}, Gem: []string{}, Go: []string{}, Npm: []string{}, Pip: []string{}}},
		Metadata: ma.Metadata{}, CreatedAt: now, UpdatedAt: now}
	if err := a.Store.CreateEnvironment(ctx, env); err != nil && !errors.Is(err, store.ErrConflict) {
		return nil, err
	}
	allow := &ma.PermissionPolicy{Type: ma.PolicyAlwaysAllow}
	agent := ma.Agent{ID: ids.New(ids.Agent), Type: "agent", Name: "demo", Description: "A demo agent seeded at first start.",
		System: "You are a helpful assistant running on reins.", Model: ma.ModelConfig{ID: modelID},
		Tools:      []ma.Tool{{Type: ma.ToolTypeAgentToolset, DefaultConfig: &ma.ToolConfig{Enabled: true, PermissionPolicy: allow}, Configs: []ma.ToolConfig{}}},
		MCPServers: []ma.MCPServer{}, Skills: []ma.SkillRef{}, Multiagent: ma.Raw("null"), ExecutionIdentity: ma.Raw("null"),
		Metadata: ma.Metadata{}, Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := a.Store.CreateAgent(ctx, agent); err != nil {
		return nil, err
	}
	return &Demo{AgentID: agent.ID, EnvironmentID: env.ID, Model: modelID}, nil
}
