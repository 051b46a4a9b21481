package executorhub

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/secret"
)

// Prefixes of the long-lived credentials an executor presents at the token
// endpoint.
const (
	EnvironmentKeyPrefix = secret.EnvironmentKeyPrefix
	MachineTokenPrefix   = secret.MachineTokenPrefix
)

// NewEnvironmentKey returns a new random environment key, to be shown once,
// and the hash to store in its place.
func NewEnvironmentKey() (key, hash string) { return secret.New(EnvironmentKeyPrefix) }

// NewMachineToken returns a new random machine token, to be shown once, and
// the hash to store in its place.
func NewMachineToken() (token, hash string) { return secret.New(MachineTokenPrefix) }

// HashSecret returns the hash under which an environment key or machine
// token is stored and looked up (hex SHA-256: the secrets are 256-bit
// random values, so a fast hash is enough).
func HashSecret(s string) string { return secret.Hash(s) }

// principal is who an executor token speaks for: one environment or one
// machine.
type principal struct {
	EnvironmentID string `json:"e,omitempty"`
	MachineID     string `json:"m,omitempty"`
}

func (p principal) scope() string {
	if p.MachineID != "" {
		return "machine:" + p.MachineID
	}
	return "environment:" + p.EnvironmentID
}

type tokenClaims struct {
	principal
	// Credential is the hash of the environment key or machine token the
	// token was exchanged for (empty for an in-process executor's token):
	// the hub checks it again at connect and closes the connections made
	// with it when it is revoked.
	Credential string `json:"k,omitempty"`
	Expires    int64  `json:"x"`
	Nonce      string `json:"n"`
}

var errBadToken = errors.New("executor: invalid executor token")

// tokenSigner issues and checks executor tokens: signed claims, so that any
// hub sharing the secret accepts them.
type tokenSigner struct{ secret []byte }

func (s tokenSigner) issue(p principal, credential string, expires time.Time) string {
	var n [9]byte
	rand.Read(n[:])
	b, _ := json.Marshal(tokenClaims{principal: p, Credential: credential, Expires: expires.Unix(), Nonce: base64.RawURLEncoding.EncodeToString(n[:])})
	payload := base64.RawURLEncoding.EncodeToString(b)
	return "reins_et_" + payload + "." + s.sign(payload)
}

func (s tokenSigner) sign(payload string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s tokenSigner) verify(tok string, now time.Time) (tokenClaims, error) {
	tok, ok := strings.CutPrefix(tok, "reins_et_")
	payload, sig, ok2 := strings.Cut(tok, ".")
	if !ok || !ok2 || !hmac.Equal([]byte(sig), []byte(s.sign(payload))) {
		return tokenClaims{}, errBadToken
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return tokenClaims{}, errBadToken
	}
	var c tokenClaims
	if err := json.Unmarshal(b, &c); err != nil {
		return tokenClaims{}, errBadToken
	}
	if now.Unix() >= c.Expires {
		return tokenClaims{}, errors.New("executor: executor token expired")
	}
	return c, nil
}
