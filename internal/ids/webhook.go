package ids

// Prefixes of webhook identifiers.
const (
	// WebhookEndpoint starts the ids of webhook endpoints.
	WebhookEndpoint = "whep_"
	// WebhookEvent starts the ids of webhook events (the webhook-id
	// header).
	WebhookEvent = "whe_"
)
