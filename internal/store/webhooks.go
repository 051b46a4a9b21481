package store

import (
	"context"
	"time"
)

// Webhook endpoint states.
const (
	WebhookEnabled  = "enabled"
	WebhookDisabled = "disabled"
)

// Webhooks stores webhook endpoints (workspaced, like agents) and the
// outbox of their deliveries. Events reach the outbox in the transaction
// of the change they report: the store's own writes enqueue the session
// and resource events (see docs/webhooks.md), and EnqueueWebhookEvent
// adds others.
type Webhooks interface {
	// CreateWebhookEndpoint stores a new endpoint in ctx's workspace.
	CreateWebhookEndpoint(ctx context.Context, e WebhookEndpoint) error
	GetWebhookEndpoint(ctx context.Context, id string) (WebhookEndpoint, error)
	// UpdateWebhookEndpoint reads the endpoint, calls fn and writes back
	// what it left, atomically. Disabling an endpoint drops its queued
	// deliveries.
	UpdateWebhookEndpoint(ctx context.Context, id string, fn func(*WebhookEndpoint) error) (WebhookEndpoint, error)
	// ListWebhookEndpoints lists ctx's workspace's endpoints, oldest
	// first.
	ListWebhookEndpoints(ctx context.Context) ([]WebhookEndpoint, error)
	// DeleteWebhookEndpoint deletes the endpoint and its queued
	// deliveries.
	DeleteWebhookEndpoint(ctx context.Context, id string) error
	// EnqueueWebhookEvent queues ev for every enabled endpoint of its
	// workspace subscribed to its type, in a transaction of its own.
	EnqueueWebhookEvent(ctx context.Context, ev WebhookEvent) error
	// ClaimWebhookDeliveries claims up to limit due deliveries of every
	// workspace: each counts an attempt and is not due again before
	// lease has passed (by the database's clock), so that no other
	// process claims it meanwhile. A process that dies holding a claim
	// leaves the delivery to be claimed again once the lease ends.
	ClaimWebhookDeliveries(ctx context.Context, lease time.Duration, limit int) ([]WebhookDelivery, error)
	// SettleWebhookDelivery records the outcome of an attempt of d.
	SettleWebhookDelivery(ctx context.Context, d WebhookDelivery, o WebhookOutcome) error
	// CountWebhookDeliveries counts the queued deliveries of every
	// workspace.
	CountWebhookDeliveries(ctx context.Context) (int64, error)
}

// WebhookEndpoint is a stored webhook endpoint.
type WebhookEndpoint struct {
	ID             string
	WorkspaceID    string // set by the store from ctx at creation
	URL            string
	Name           string
	Description    string
	EnabledEvents  []string
	State          string // WebhookEnabled or WebhookDisabled
	DisabledReason string
	// SealedSecret is the signing secret sealed under the master key,
	// with the endpoint's id as its associated data.
	SealedSecret []byte
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// WebhookEvent is an event for the outbox: its envelope's fields.
type WebhookEvent struct {
	ID          string // whe_…; the store makes one when empty
	Type        string // e.g. session.created
	ResourceID  string // data.id
	WorkspaceID string
	CreatedAt   time.Time // when it happened; the store's clock when zero
	// Extra are further data fields (e.g. vault_id, session_thread_id).
	Extra map[string]string
}

// WebhookDelivery is a claimed delivery of an event to an endpoint.
type WebhookDelivery struct {
	EndpointID   string
	EventID      string
	EventType    string
	Body         []byte // the envelope, as sent
	Attempts     int    // counting the attempt just claimed
	URL          string
	SealedSecret []byte
}

// WebhookOutcome is what became of an attempt.
type WebhookOutcome struct {
	// Delivered: a 2xx; the delivery is done and the endpoint's count of
	// failed deliveries starts again.
	Delivered bool
	// RetryIn, when positive and not Delivered, makes the delivery due
	// again after that long. Zero drops it: it counts as a failed
	// delivery of the endpoint.
	RetryIn time.Duration
	// Disable, when set, disables the endpoint with that reason (its
	// queued deliveries are dropped).
	Disable string
	// DisableAfter, when positive, disables the endpoint once it has
	// dropped that many deliveries in a row.
	DisableAfter int
}
