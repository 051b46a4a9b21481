package vault

import (
	"encoding/json"
	"fmt"
)

// Secrets are the secret fields of a credential, stored only sealed. Which
// fields are set depends on the credential's kind.
type Secrets struct {
	// Token is a static_bearer token.
	Token string `json:"token,omitempty"`
	// AccessToken, RefreshToken and ClientSecret belong to mcp_oauth.
	AccessToken  string `json:"access_token,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	// Value is an environment_variable's secret_value.
	Value string `json:"secret_value,omitempty"`
}

// SealSecrets seals s for the credential id.
func (k *Keyring) SealSecrets(s Secrets, credentialID string) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return k.Seal(b, credentialID)
}

// OpenSecrets opens what SealSecrets sealed.
func (k *Keyring) OpenSecrets(ciphertext []byte, credentialID string) (Secrets, error) {
	var s Secrets
	b, err := k.Open(ciphertext, credentialID)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return s, nil
}
