package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts a signing secret; base64 of its key follows.
const SecretPrefix = "whsec_"

// NewSecret returns a new signing secret: whsec_ and 32 random bytes in
// base64.
func NewSecret() string {
	key := make([]byte, 32)
	rand.Read(key)
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Signature returns the webhook-signature header of a delivery (Standard
// Webhooks): "v1," and the base64 HMAC-SHA256 of "{id}.{timestamp}.{body}"
// keyed with the base64-decoded part of secret after whsec_.
func Signature(secret, id string, at time.Time, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(key) == 0 {
		return "", errors.New("webhooks: malformed signing secret")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(at.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}
