package httpapi

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/reinsdev/reins/internal/deployments"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Launch creates the session of the run runID of d
// (deployments.Launcher): the deployment's pinned agent version,
// environment, resources (with new resource ids), vaults and initial
// events, and its deployment_id, through the sessions service, as POST
// /v1/sessions does, and records it on the run in the session's
// transaction. What it finds gone, archived or blocked is a
// *deployments.RunError of the matching type; what the session's rules
// refuse is session_creation_rejected_error.
func (s *Server) Launch(ctx context.Context, d store.Deployment, runID string) (string, error) {
	if err := s.checkRunInputs(ctx, d); err != nil {
		return "", err
	}
	sa, err := s.resolveAgent(ctx, &agentRef{Type: "agent", ID: d.Agent.ID, Version: d.Agent.Version})
	if err != nil {
		return "", rejectedRun(err)
	}
	resources, err := renewResources(d.Resources)
	if err != nil {
		return "", err
	}
	initial := make([]ma.Event, len(d.Initial))
	copy(initial, d.Initial)
	budget, err := sessions.ParseBudget(d.Budget)
	if err != nil {
		return "", rejectedRun(err)
	}
	draft := sessions.Draft{Agent: sa, EnvironmentID: d.EnvironmentID, Resources: resources, VaultIDs: d.VaultIDs,
		Initial: initial, DeploymentID: d.ID, Budget: budget}
	sess, err := s.cfg.Sessions.Prepare(ctx, draft)
	if err != nil {
		return "", rejectedRun(err)
	}
	sess, err = s.cfg.Sessions.Create(ctx, sess, initial, func(tx store.Tx, _ int64) error {
		return tx.FinishDeploymentRun(runID)
	})
	if err != nil {
		return "", rejectedRun(err)
	}
	return sess.ID, nil
}

// rejectedRun is err as a run's error: what the API would refuse with a
// 4xx is a session_creation_rejected_error.
func rejectedRun(err error) error {
	var re *sessions.RejectedError
	var ae *apiError
	if errors.As(err, &re) || errors.As(err, &ae) || errors.Is(err, store.ErrNotFound) {
		return deployments.Errorf(deployments.ErrRejected, "the session was refused: %v", err)
	}
	return err
}

// checkRunInputs finds what a run needs gone, archived or refused: the
// workspace, the environment, the agent and the skills and MCP servers
// of its pinned version, the vaults, the files and memory stores of the
// resources. Each is a *deployments.RunError of its type.
func (s *Server) checkRunInputs(ctx context.Context, d store.Deployment) error {
	if err := s.checkRunWorkspace(ctx, d.WorkspaceID); err != nil {
		return err
	}
	env, err := s.cfg.Store.GetEnvironment(ctx, d.EnvironmentID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return deployments.Errorf("environment_not_found_error", "environment %s not found", d.EnvironmentID)
	case err != nil:
		return err
	case env.ArchivedAt != nil:
		return deployments.Errorf("environment_archived_error", "environment %s is archived", d.EnvironmentID)
	}
	agent, err := s.cfg.Store.GetAgent(ctx, d.Agent.ID, 0)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return deployments.Errorf(deployments.ErrRejected, "agent %s not found", d.Agent.ID)
	case err != nil:
		return err
	case agent.ArchivedAt != nil:
		return deployments.Errorf("agent_archived_error", "agent %s is archived", d.Agent.ID)
	}
	if err := s.checkRunAgent(ctx, d, &env); err != nil {
		return err
	}
	for _, id := range d.VaultIDs {
		v, err := s.cfg.Store.GetVault(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return deployments.Errorf("vault_not_found_error", "vault %s not found", id)
		case err != nil:
			return err
		case v.ArchivedAt != nil:
			return deployments.Errorf("vault_archived_error", "vault %s is archived", id)
		}
	}
	return s.checkRunResources(ctx, d.Resources)
}

// checkRunWorkspace finds the deployment's workspace archived: its
// requests are refused, so are its deployments' runs.
func (s *Server) checkRunWorkspace(ctx context.Context, id string) error {
	if id == "" {
		id = store.DefaultWorkspace
	}
	ws, err := s.cfg.Store.GetWorkspace(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return deployments.Errorf("workspace_archived_error", "workspace %s no longer exists", id)
	case err != nil:
		return err
	case ws.ArchivedAt != nil:
		return deployments.Errorf("workspace_archived_error", "workspace %s is archived", id)
	}
	return nil
}

// checkRunAgent finds a skill of the pinned agent version deleted, or an
// MCP server of it that env's network policy does not let a session
// reach (sessions.BlockedMCPHost, the egress proxy's rule).
func (s *Server) checkRunAgent(ctx context.Context, d store.Deployment, env *ma.Environment) error {
	a, err := s.cfg.Store.GetAgent(ctx, d.Agent.ID, d.Agent.Version)
	if errors.Is(err, store.ErrNotFound) {
		return deployments.Errorf(deployments.ErrRejected, "version %d of agent %s not found", d.Agent.Version, d.Agent.ID)
	}
	if err != nil {
		return err
	}
	i, err := s.skills.deletedSkill(ctx, a.Skills)
	if err != nil {
		return err
	}
	if i >= 0 {
		ref := a.Skills[i]
		return deployments.Errorf("skill_not_found_error", "version %s of skill %s, a skill of agent %s version %d, was deleted",
			ref.Version, ref.SkillID, a.ID, a.Version)
	}
	if host, ok := sessions.BlockedMCPHost(env, &ma.SessionAgent{MCPServers: a.MCPServers}); ok {
		return deployments.Errorf("mcp_egress_blocked_error",
			"the MCP server host %s of agent %s version %d is not allowed by the networking of environment %s (allowed_hosts, allow_mcp_servers)",
			host, a.ID, a.Version, env.ID)
	}
	return nil
}

// checkRunResources finds the files and memory stores of resources gone
// or archived.
func (s *Server) checkRunResources(ctx context.Context, resources []ma.Raw) error {
	for _, raw := range resources {
		var res struct {
			Type          string `json:"type"`
			FileID        string `json:"file_id"`
			MemoryStoreID string `json:"memory_store_id"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			return err
		}
		switch res.Type {
		case "file":
			if _, err := s.cfg.Store.GetFile(ctx, res.FileID); errors.Is(err, store.ErrNotFound) {
				return deployments.Errorf("file_not_found_error", "file %s not found", res.FileID)
			} else if err != nil {
				return err
			}
		case "memory_store":
			ms, err := s.cfg.Store.GetMemoryStore(ctx, res.MemoryStoreID)
			switch {
			case errors.Is(err, store.ErrNotFound):
				return deployments.Errorf("session_resource_not_found_error", "memory store %s not found", res.MemoryStoreID)
			case err != nil:
				return err
			case ms.ArchivedAt != nil:
				return deployments.Errorf("memory_store_archived_error", "memory store %s is archived", res.MemoryStoreID)
			}
		}
	}
	return nil
}

// renewResources returns the resources with new resource ids: each
// session has its own.
func renewResources(resources []ma.Raw) ([]ma.Raw, error) {
	out := make([]ma.Raw, len(resources))
	for i, raw := range resources {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		if _, ok := m["id"]; ok {
			id, _ := json.Marshal(ids.New(ids.SessionResource))
			m["id"] = id
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}
