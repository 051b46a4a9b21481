package managedagents

import (
	"encoding/json"
	"time"
)

// Metadata is a resource's string key-value bag.
type Metadata map[string]string

// Page is a cursor page of a list endpoint. NextPage is null on the last
// page, which is how the SDKs' auto-pagers know to stop.
type Page[T any] struct {
	Data     []T     `json:"data"`
	NextPage *string `json:"next_page"`
}

// BidirectionalPage is the page shape of the sessions list.
type BidirectionalPage[T any] struct {
	Data     []T     `json:"data"`
	NextPage *string `json:"next_page"`
	PrevPage *string `json:"prev_page"`
}

// Deleted is the body of a successful delete.
type Deleted struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// Time formats t as the API does: RFC 3339 in UTC with fractional seconds.
func Time(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// TimePtr is Time for a nullable timestamp.
func TimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := Time(*t)
	return &s
}

// Raw is a JSON value kept as it was received.
type Raw = json.RawMessage
