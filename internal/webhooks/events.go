// Package webhooks delivers the events of a workspace to its webhook
// endpoints: Standard Webhooks signing, the event types endpoints may
// subscribe to, and the Deliverer, which drains the store's outbox.
package webhooks

import (
	"fmt"
	"slices"
	"strings"
)

// EventTypes are the Managed Agents webhook event types of the Go SDK
// v2.17.0 (betawebhook.go) an endpoint may subscribe to. reins accepts
// them all on /v1/organizations/webhooks, where the hosted API takes only
// organization-level types; which of them reins emits is told in
// docs/webhooks.md.
var EventTypes = []string{
	"session.created", "session.pending", "session.running", "session.idled", "session.requires_action",
	"session.updated", "session.archived", "session.deleted", "session.status_rescheduled",
	"session.status_run_started", "session.status_idled", "session.status_terminated",
	"session.thread_created", "session.thread_idled", "session.thread_terminated",
	"session.outcome_evaluation_ended", "session.budget_reached",
	"agent.created", "agent.updated", "agent.archived", "agent.deleted",
	"environment.created", "environment.updated", "environment.archived", "environment.deleted",
	"vault.created", "vault.archived", "vault.deleted",
	"vault_credential.created", "vault_credential.archived", "vault_credential.deleted", "vault_credential.refresh_failed",
	"memory_store.created", "memory_store.archived", "memory_store.deleted",
	"deployment.created", "deployment.updated", "deployment.paused", "deployment.unpaused", "deployment.archived", "deployment.deleted",
	"deployment_run.started", "deployment_run.succeeded", "deployment_run.failed",
}

// CheckEventTypes returns an error naming the types that are not
// EventTypes, and nil when all are.
func CheckEventTypes(types []string) error {
	var unknown []string
	for _, t := range types {
		if !slices.Contains(EventTypes, t) {
			unknown = append(unknown, fmt.Sprintf("%q", t))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	return fmt.Errorf("unknown event types %s; known types are the Managed Agents webhook events (session.*, agent.*, environment.*, vault.*, vault_credential.*, memory_store.*, deployment.*, deployment_run.*), see docs/webhooks.md",
		strings.Join(unknown, ", "))
}
