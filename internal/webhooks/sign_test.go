package webhooks

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestSignature checks the signature against the Standard Webhooks
// specification's example.
func TestSignature(t *testing.T) {
	got, err := Signature("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; err != nil || got != want {
		t.Fatalf("Signature = %q, %v; want %q", got, err, want)
	}
	if _, err := Signature("whsec_not base64!", "id", time.Now(), nil); err == nil {
		t.Fatal("a malformed secret signed")
	}
}

func TestNewSecret(t *testing.T) {
	s := NewSecret()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, SecretPrefix))
	if !strings.HasPrefix(s, SecretPrefix) || err != nil || len(key) != 32 || s == NewSecret() {
		t.Fatalf("NewSecret = %q (%v)", s, err)
	}
}

func TestCheckEventTypes(t *testing.T) {
	if err := CheckEventTypes([]string{"session.created", "deployment_run.failed", "memory_store.deleted"}); err != nil {
		t.Fatal(err)
	}
	err := CheckEventTypes([]string{"session.created", "session.exploded", "external_key.failed"})
	if err == nil || !strings.Contains(err.Error(), `"session.exploded", "external_key.failed"`) {
		t.Fatalf("CheckEventTypes = %v", err)
	}
}
