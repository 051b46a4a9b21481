// Package turntoken issues and verifies the short-lived bearer tokens of
// a turn running on an agent end: a model token for the model gateway and
// a tools token for the platform tools endpoint.
//
// A token is stateless: its claims (kind, session, turn, expiry) are
// signed with HMAC-SHA256 under a key derived from the server's master key
// with a label per kind, so every replica sharing the master key verifies
// it, and a token of one kind is never accepted as the other. Whether the
// turn still runs is for the caller to check: a token outlives its turn
// until it expires.
package turntoken

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind is what a token grants.
type Kind string

// The kinds of token.
const (
	// Model grants calls to the model gateway.
	Model Kind = "model"
	// Tools grants calls to the platform tools endpoint.
	Tools Kind = "tools"
)

// prefix is the recognisable start of a token of each kind.
func (k Kind) prefix() string {
	switch k {
	case Model:
		return "rmt_"
	case Tools:
		return "rtt_"
	}
	return ""
}

// DefaultTTL is the lifetime of a token when New is given none.
const DefaultTTL = 15 * time.Minute

// maxTokenLen bounds what Verify decodes.
const maxTokenLen = 1024

// Errors of Verify.
var (
	// ErrExpired: the token was valid but its expiry has passed.
	ErrExpired = errors.New("turntoken: the token expired")
	// ErrInvalid: not a token of this kind issued under this key.
	ErrInvalid = errors.New("turntoken: invalid token")
)

// Claims are what a token says.
type Claims struct {
	Kind      Kind
	SessionID string
	TurnID    string
	ExpiresAt time.Time
}

// wireClaims is the signed payload.
type wireClaims struct {
	SessionID string `json:"s"`
	TurnID    string `json:"t"`
	Expires   int64  `json:"e"` // Unix seconds
}

// Issuer issues and verifies turn tokens.
type Issuer struct {
	keys map[Kind][]byte
	ttl  time.Duration
	// Now is the clock (time.Now by default); tests may replace it.
	Now func() time.Time
}

// New returns an Issuer whose keys derive from masterKey (the server's
// master key) and whose tokens live ttl (DefaultTTL when ttl <= 0).
func New(masterKey []byte, ttl time.Duration) (*Issuer, error) {
	if len(masterKey) == 0 {
		return nil, errors.New("turntoken: empty master key")
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	is := &Issuer{keys: map[Kind][]byte{}, ttl: ttl, Now: time.Now}
	for _, k := range []Kind{Model, Tools} {
		key, err := hkdf.Key(sha256.New, masterKey, nil, "reins turn token "+string(k), sha256.Size)
		if err != nil {
			return nil, fmt.Errorf("turntoken: derive the %s key: %w", k, err)
		}
		is.keys[k] = key
	}
	return is, nil
}

// TTL is the lifetime of the tokens Issue returns.
func (is *Issuer) TTL() time.Duration { return is.ttl }

// Issue returns a token of kind for the turn, and when it expires.
func (is *Issuer) Issue(kind Kind, sessionID, turnID string) (token string, expiresAt time.Time, err error) {
	key := is.keys[kind]
	if key == nil {
		return "", time.Time{}, fmt.Errorf("turntoken: unknown kind %q", kind)
	}
	expiresAt = is.Now().Add(is.ttl).Truncate(time.Second)
	payload, err := json.Marshal(wireClaims{SessionID: sessionID, TurnID: turnID, Expires: expiresAt.Unix()})
	if err != nil {
		return "", time.Time{}, err
	}
	body := kind.prefix() + base64.RawURLEncoding.EncodeToString(payload)
	return body + "." + base64.RawURLEncoding.EncodeToString(sign(key, body)), expiresAt.UTC(), nil
}

// Verify checks that token is a token of kind issued under this Issuer's
// key and not expired, and returns its claims: ErrInvalid for a token of
// another kind, a bad signature or a malformed token, ErrExpired for an
// expired one.
func (is *Issuer) Verify(kind Kind, token string) (Claims, error) {
	key := is.keys[kind]
	if key == nil || len(token) > maxTokenLen || !strings.HasPrefix(token, kind.prefix()) {
		return Claims{}, ErrInvalid
	}
	body, sig, ok := strings.Cut(token, ".")
	if !ok {
		return Claims{}, ErrInvalid
	}
	mac, err := b64.DecodeString(sig)
	if err != nil || !hmac.Equal(mac, sign(key, body)) {
		return Claims{}, ErrInvalid
	}
	payload, err := b64.DecodeString(body[len(kind.prefix()):])
	if err != nil {
		return Claims{}, ErrInvalid
	}
	var w wireClaims
	if err := json.Unmarshal(payload, &w); err != nil || w.SessionID == "" || w.TurnID == "" {
		return Claims{}, ErrInvalid
	}
	c := Claims{Kind: kind, SessionID: w.SessionID, TurnID: w.TurnID, ExpiresAt: time.Unix(w.Expires, 0).UTC()}
	if !is.Now().Before(c.ExpiresAt) {
		return c, ErrExpired
	}
	return c, nil
}

// b64 decodes strictly: one encoding per token, no malleable padding bits.
var b64 = base64.RawURLEncoding.Strict()

func sign(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// ToolsPath is the path of a session's platform tools endpoint, the one
// endpoint a tools token is good for.
func ToolsPath(sessionID string) string { return "/v1/sessions/" + sessionID + "/tool_calls" }
