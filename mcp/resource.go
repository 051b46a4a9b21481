package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ResourceReadMetaKey is the _meta key under which a partial resource read
// reports its per-item issues, as {"partial":true,"issues":[…]}.
const ResourceReadMetaKey = "go.phpboyscout.uk/mcp.resourceRead"

// DefaultBundleBudget bounds the bytes of one resource read.
const DefaultBundleBudget = 4 << 20

// An IssueCode is the reason one item of a resource bundle is missing.
type IssueCode string

// The resource issue codes.
const (
	IssueUnavailable    IssueCode = "unavailable"
	IssueReadFailed     IssueCode = "read_failed"
	IssueTimeout        IssueCode = "timeout"
	IssueInvalidContent IssueCode = "invalid_content"
	IssueBudgetExceeded IssueCode = "budget_exceeded"
)

// issueMessages are the fixed message templates of the issue codes.
var issueMessages = map[IssueCode]string{
	IssueUnavailable:    "the item is not available",
	IssueReadFailed:     "the item could not be read",
	IssueTimeout:        "reading the item timed out",
	IssueInvalidContent: "the item's content does not match its declared type",
	IssueBudgetExceeded: "the item was skipped: the read's byte budget is spent",
}

// A Resource is a readable resource whose read returns a bundle of items.
type Resource struct {
	// URI identifies the resource.
	URI string
	// Name, Title, Description and MIMEType describe it in resources/list.
	Name, Title, Description, MIMEType string
	// Budget bounds the bytes of one read. Zero means DefaultBundleBudget.
	Budget int
	// Read returns the bundle. An error fails the whole read; a per-item
	// problem is reported in that item's Err.
	Read func(ctx context.Context, uri string) ([]Item, error)
}

// An Item is one member of a resource bundle.
type Item struct {
	// URI identifies the item.
	URI string
	// MIMEType is its media type; text/* items must hold valid UTF-8.
	MIMEType string
	// Text or Blob is the content.
	Text string
	Blob []byte
	// Err, when non-nil, reports that the item could not be produced.
	// fs.ErrNotExist maps to unavailable, context.DeadlineExceeded to
	// timeout, anything else to read_failed. It is logged, never sent.
	Err error
}

// issue is one per-item problem on the wire.
type issue struct {
	URI       string    `json:"uri"`
	Code      IssueCode `json:"code"`
	Message   string    `json:"message"`
	Retryable bool      `json:"retryable"`
}

func newIssue(uri string, c IssueCode) issue {
	return issue{URI: uri, Code: c, Message: issueMessages[c], Retryable: c == IssueReadFailed}
}

// addResources publishes the configured resources and views.
func (s *Server) addResources() {
	for _, r := range s.opts.Resources {
		r := r
		s.sdk.AddResource(&sdk.Resource{URI: r.URI, Name: r.Name, Title: r.Title,
			Description: r.Description, MIMEType: r.MIMEType},
			func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				return s.readBundle(ctx, r, req.Params.URI)
			})
	}
	for _, v := range s.opts.Views {
		v := v
		s.sdk.AddResource(&sdk.Resource{URI: v.URI, Name: v.Name, MIMEType: ViewMIMEType},
			func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				c := &sdk.ResourceContents{URI: v.URI, MIMEType: ViewMIMEType, Text: v.HTML}
				if v.CSP != nil {
					c.Meta = sdk.Meta{"ui": map[string]any{"csp": v.CSP}}
				}
				return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{c}}, nil
			})
	}
}

// readFailure renders a failed read as a JSON-RPC error with safe data.
func readFailure(f *Failure) error {
	data, _ := json.Marshal(f.envelope()["failure"])
	code := int64(jsonrpc.CodeInternalError)
	if f.code == CodeUnavailable {
		code = -32002 // resource not found
	}
	return &jsonrpc.Error{Code: code, Message: f.message, Data: data}
}

func (s *Server) readBundle(ctx context.Context, r Resource, uri string) (*sdk.ReadResourceResult, error) {
	items, err := r.Read(ctx, uri)
	if err != nil {
		f := NewFailure(CodeReadFailed, "the resource could not be read", err)
		switch {
		case errors.As(err, new(*Failure)):
			f = asFailure(err)
		case errors.Is(err, fs.ErrNotExist):
			f = NewFailure(CodeUnavailable, "the resource is not available", err)
		case errors.Is(err, context.DeadlineExceeded):
			f = NewFailure(CodeTimeout, "reading the resource timed out", err)
		}
		s.log.Info("mcp: resource read failed", "uri", uri, "code", string(f.code), "cause", f.cause)
		return nil, readFailure(f)
	}
	budget := r.Budget
	if budget <= 0 {
		budget = DefaultBundleBudget
	}
	res := &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{}}
	var issues []issue
	used := 0
	for _, it := range items {
		code, ok := itemProblem(it)
		if ok {
			n := len(it.Text) + len(it.Blob)
			if used+n > budget {
				code, ok = IssueBudgetExceeded, false
			} else {
				used += n
			}
		}
		if !ok {
			if it.Err != nil {
				s.log.Info("mcp: resource item failed", "uri", it.URI, "code", string(code), "cause", it.Err)
			}
			issues = append(issues, newIssue(it.URI, code))
			continue
		}
		res.Contents = append(res.Contents, &sdk.ResourceContents{URI: it.URI, MIMEType: it.MIMEType, Text: it.Text, Blob: it.Blob})
	}
	if len(res.Contents) == 0 && len(items) > 0 {
		return nil, readFailure(NewFailure(CodeReadFailed, fmt.Sprintf("none of the %d items could be read", len(items)), nil))
	}
	if len(issues) > 0 {
		res.Meta = sdk.Meta{ResourceReadMetaKey: map[string]any{"partial": true, "issues": issues}}
	}
	return res, nil
}

// itemProblem classifies an item; ok is true when it can be sent.
func itemProblem(it Item) (IssueCode, bool) {
	switch {
	case it.Err == nil:
	case errors.Is(it.Err, fs.ErrNotExist):
		return IssueUnavailable, false
	case errors.Is(it.Err, context.DeadlineExceeded):
		return IssueTimeout, false
	default:
		return IssueReadFailed, false
	}
	if it.Blob == nil && !utf8.ValidString(it.Text) {
		return IssueInvalidContent, false
	}
	return "", true
}
