package mcp

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// claims is the signed content of a continuation token.
type claims struct {
	Instance string `json:"i"`
	Chain    string `json:"c"`
	Step     int    `json:"s"`
	Op       string `json:"o"`
	Caller   string `json:"u"`
	Args     string `json:"a"`
	Expires  int64  `json:"e"` // Unix milliseconds
}

// tokens signs continuation tokens with a key born with the server and
// keeps the ledger of open chains.
type tokens struct {
	instance string
	key      []byte

	capacity int // the open chains kept at most

	mu     sync.Mutex // guards chains and the chains in it
	chains map[string]*ledgerChain
}

type ledgerChain struct {
	answers []answer
	expires time.Time
	busy    bool
	done    bool // the chain's call completed; evicted first when full
}

// finish marks a chain whose call completed. It stays to judge replays
// until it expires or the ledger needs its room.
func (t *tokens) finish(id string) {
	if id == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if lc, ok := t.chains[id]; ok {
		lc.done = true
	}
}

func newTokens(capacity int) *tokens {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &tokens{instance: newInstanceID(), key: key, capacity: capacity, chains: map[string]*ledgerChain{}}
}

func (t *tokens) sign(c claims) string {
	payload, _ := json.Marshal(c)
	mac := hmac.New(sha256.New, t.key)
	mac.Write(payload)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(mac.Sum(nil))
}

// parse verifies a token. Its errors are failures with the continuation
// codes.
func (t *tokens) parse(tok string) (claims, error) {
	var c claims
	invalid := func(cause string) error {
		return NewFailure(CodeContinuationInvalid, "the continuation token is not valid", errors.New(cause))
	}
	p, m, ok := strings.Cut(tok, ".")
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p)
	sum, err2 := enc.DecodeString(m)
	if !ok || err1 != nil || err2 != nil || len(tok) > 4096 {
		return c, invalid("malformed token")
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, invalid("malformed claims")
	}
	if c.Instance != t.instance {
		return c, NewFailure(CodeContinuationStale,
			"the continuation token belongs to a previous server lifetime; start over", nil)
	}
	mac := hmac.New(sha256.New, t.key)
	mac.Write(payload)
	if !hmac.Equal(sum, mac.Sum(nil)) {
		return c, invalid("bad signature")
	}
	return c, nil
}

// digest is a stable digest of a JSON value.
func digest(v any) string {
	raw, _ := json.Marshal(v)
	var x any
	_ = json.Unmarshal(raw, &x)
	raw, _ = json.Marshal(x) // maps marshal with sorted keys
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16])
}

// argsDigest digests the call's arguments, once: only calls that issue or
// present a continuation token need it.
func (ch *chain) argsDigest() string {
	if ch.args == "" {
		var v any
		_ = json.Unmarshal(ch.rawArgs, &v)
		ch.args = digest(v)
	}
	return ch.args
}

func stepKey(step int) string { return fmt.Sprintf("reins-step-%d", step) }

// invalidPair is the protocol error for a requestState and inputResponses
// that do not go together.
func invalidPair(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid continuation: " + msg}
}

// resume prepares the confirmation chain of a call: a fresh one, or the
// one its continuation token names. The returned release ends the chain's
// transition.
func (s *Server) resume(req *sdk.CallToolRequest, op, caller string, args json.RawMessage) (*chain, func(), error) {
	p := req.Params
	ch := &chain{
		mrtr:    req.ProtocolVersion() >= "2026-07-28",
		rawArgs: args,
		op:      op,
		caller:  caller,
		limit:   s.opts.PromptLimit,
		req:     req,
	}
	noop := func() {}
	if p.RequestState == "" {
		if len(p.InputResponses) > 0 {
			return nil, nil, invalidPair("inputResponses without requestState")
		}
		return ch, noop, nil
	}
	c, err := s.tokens.parse(p.RequestState)
	if err != nil {
		return nil, nil, err
	}
	resp, ok := p.InputResponses[stepKey(c.Step)]
	if !ok || len(p.InputResponses) != 1 {
		return nil, nil, invalidPair("inputResponses must answer exactly the pending request")
	}
	var a answer
	raw, _ := json.Marshal(resp)
	if err := json.Unmarshal(raw, &a); err != nil || a.Action == "" {
		return nil, nil, invalidPair("the input response is not an elicitation result")
	}
	switch {
	case c.Op != op:
		return nil, nil, NewFailure(CodeContinuationInvalid, "the continuation token is for another operation", nil)
	case c.Caller != caller:
		return nil, nil, NewFailure(CodeContinuationInvalid, "the continuation token is for another caller", nil)
	case c.Args != ch.argsDigest():
		return nil, nil, NewFailure(CodeContinuationInvalid, "the arguments differ from those the continuation was issued for", nil)
	case time.Now().UnixMilli() > c.Expires:
		return nil, nil, NewFailure(CodeContinuationStale, "the prompt has expired; start over", nil)
	}
	t := s.tokens
	t.mu.Lock()
	defer t.mu.Unlock()
	lc, ok := t.chains[c.Chain]
	switch {
	case !ok:
		return nil, nil, NewFailure(CodeContinuationStale, "the confirmation chain is no longer open; start over", nil)
	case lc.busy:
		return nil, nil, NewFailure(CodeBusy, "another answer for this confirmation chain is being processed", nil)
	case c.Step > len(lc.answers):
		return nil, nil, NewFailure(CodeContinuationInvalid, "the continuation token skips a step", nil)
	case c.Step < len(lc.answers) && digest(lc.answers[c.Step]) != digest(a):
		return nil, nil, NewFailure(CodeContinuationInvalid, "the answer conflicts with the one already recorded", nil)
	case c.Step == len(lc.answers):
		lc.answers = append(lc.answers, a)
	}
	lc.busy = true
	ch.id = c.Chain
	ch.replay = append([]answer(nil), lc.answers[:c.Step+1]...)
	return ch, func() {
		t.mu.Lock()
		lc.busy = false
		t.mu.Unlock()
	}, nil
}

// inputRequired records the pending prompt of ch in the ledger and renders
// it as an input-required result carrying a continuation token.
func (s *Server) inputRequired(ch *chain) (*sdk.CallToolResult, *Failure) {
	step := ch.next - 1
	now := time.Now()
	exp := now.Add(s.opts.PromptTTL)
	t := s.tokens
	t.mu.Lock()
	if ch.id == "" {
		ch.id = newInstanceID()
	}
	lc, ok := t.chains[ch.id]
	if !ok {
		for id, c := range t.chains {
			if now.After(c.expires) && !c.busy {
				delete(t.chains, id)
			}
		}
		for id, c := range t.chains {
			if len(t.chains) < t.capacity {
				break
			}
			if c.done && !c.busy {
				delete(t.chains, id)
			}
		}
		if len(t.chains) >= t.capacity {
			t.mu.Unlock()
			return nil, NewFailure(CodeBusy, "too many confirmations are open; retry later", nil)
		}
		lc = &ledgerChain{}
		t.chains[ch.id] = lc
	}
	lc.expires = exp
	t.mu.Unlock()
	tok := t.sign(claims{Instance: t.instance, Chain: ch.id, Step: step, Op: ch.op,
		Caller: ch.caller, Args: ch.argsDigest(), Expires: exp.UnixMilli()})
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{stepKey(step): ch.pending.params(tok)},
		RequestState:  tok,
	}, nil
}
