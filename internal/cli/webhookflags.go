package cli

import (
	"github.com/spf13/pflag"

	"github.com/reinsdev/reins/internal/webhooks"
)

// registerWebhookFlags registers the flags of webhook delivery into c.
func registerWebhookFlags(f *pflag.FlagSet, c *webhooks.Config) {
	f.BoolVar(&c.AllowHTTP, "webhook-allow-http", false,
		"accept and deliver to http:// webhook endpoint URLs, not only https:// (a receiver on an internal address also needs --outbound-allow) (REINS_WEBHOOK_ALLOW_HTTP)")
	f.IntVar(&c.Attempts, "webhook-attempts", webhooks.DefaultAttempts, "attempts of one webhook delivery before it is dropped (REINS_WEBHOOK_ATTEMPTS)")
	f.DurationVar(&c.MinBackoff, "webhook-backoff-min", webhooks.DefaultMinBackoff, "shortest delay between attempts of a webhook delivery (REINS_WEBHOOK_BACKOFF_MIN)")
	f.DurationVar(&c.MaxBackoff, "webhook-backoff-max", webhooks.DefaultMaxBackoff, "longest delay between attempts of a webhook delivery; jittered, doubling from the shortest (REINS_WEBHOOK_BACKOFF_MAX)")
	f.DurationVar(&c.Timeout, "webhook-timeout", webhooks.DefaultTimeout, "bound of one webhook delivery attempt (REINS_WEBHOOK_TIMEOUT)")
	f.DurationVar(&c.Poll, "webhook-poll", webhooks.DefaultPoll, "how often the webhook outbox is read for due deliveries (REINS_WEBHOOK_POLL)")
}
