package dreams

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/reinsdev/reins/internal/agents"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// AgentID is the id of the built-in dream agent in its sessions. It is
// not a stored agent: each dream's session carries the agent's snapshot
// (SystemPrompt, the agent toolset, the dream's model).
const AgentID = "agent_reins_dream"

// agent is the snapshot of the dream agent with the model m: the agent
// toolset, every tool allowed without confirmation, web_fetch and
// web_search off (its environment has no network).
func agent(m ma.DreamModel) (ma.SessionAgent, error) {
	off := false
	tools, err := agents.ResolveTools([]agents.ToolParam{{Type: ma.ToolTypeAgentToolset,
		Configs: []agents.ToolConfigParam{{Name: "web_fetch", Enabled: &off}, {Name: "web_search", Enabled: &off}}}}, nil)
	if err != nil {
		return ma.SessionAgent{}, fmt.Errorf("dream agent's tools: %w", err)
	}
	return ma.SessionAgent{ID: AgentID, Type: "agent", Name: "reins dream", Description: "The built-in agent of dreams: reorganizes a memory store from past sessions.",
		System: SystemPrompt, Model: ma.ModelConfig{ID: m.ID}, Tools: tools, MCPServers: []ma.MCPServer{}, Skills: []ma.SkillRef{},
		Multiagent: ma.Raw("null"), Version: 1}, nil
}

// environmentName is the name of the dreams' environment of a workspace
// (unless another environment has it: then its id).
const environmentName = "reins dreams"

// environmentID is the id of the dreams' environment of workspace ws: one
// per workspace, found again by its id.
func environmentID(ws string) string {
	sum := sha256.Sum256([]byte(ws))
	return "env_dreams" + hex.EncodeToString(sum[:8])
}

// environmentConfig is the dreams' environment's configuration: a cloud
// sandbox without network access and without packages.
func environmentConfig() ma.EnvironmentConfig {
	f := false
	return ma.EnvironmentConfig{Type: ma.EnvCloud,
		Networking: &ma.Networking{Type: "limited", AllowedHosts: []string{}, AllowPackageManagers: &f, AllowMCPServers: &f},
		Packages:   &ma.Packages{Type: "packages", Apt: []string{}, Cargo: []string{}, Gem: []string{}, Go: []string{}, Npm: []string{}, Pip: []string{}}}
}

// environment returns the id of ctx's workspace's dreams' environment,
// made on its first use and put back as it was (not archived, no
// network) when someone changed it.
func (r *Runner) environment(ctx context.Context, ws string) (string, error) {
	id := environmentID(ws)
	env, err := r.cfg.Store.GetEnvironment(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return id, r.createEnvironment(ctx, id)
	}
	if err != nil {
		return "", err
	}
	want := environmentConfig()
	if env.ArchivedAt == nil && reflect.DeepEqual(env.Config, want) {
		return id, nil
	}
	_, err = r.cfg.Store.UpdateEnvironment(ctx, id, func(e *ma.Environment) error {
		e.ArchivedAt, e.Config, e.UpdatedAt = nil, want, ma.Time(time.Now())
		return nil
	})
	return id, err
}

// createEnvironment creates the dreams' environment id; one made
// meanwhile by another dream is fine.
func (r *Runner) createEnvironment(ctx context.Context, id string) error {
	now := ma.Time(time.Now())
	e := ma.Environment{ID: id, Type: "environment", Name: environmentName,
		Description: "Built by reins for dreams: a cloud sandbox without network access. reins puts it back as it was if it is changed.",
		Config:      environmentConfig(), Metadata: ma.Metadata{}, CreatedAt: now, UpdatedAt: now}
	for range 2 {
		err := r.cfg.Store.CreateEnvironment(ctx, e)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		if _, err := r.cfg.Store.GetEnvironment(ctx, id); err == nil {
			return nil // made by another dream
		}
		e.Name = id // the name is taken by another environment
	}
	return fmt.Errorf("create the dreams' environment %s: its name is taken", id)
}
