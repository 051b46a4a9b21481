package harness

import (
	"context"
	"errors"
	"fmt"
)

// CredentialChecker checks, before each model call, that the session's
// credentials can be used in its environment.
type CredentialChecker interface {
	// Check returns a *CredentialError when a credential cannot be used.
	Check(ctx context.Context, sessionID, environmentID string, vaultIDs []string) error
}

// CredentialError is an environment_variable credential whose
// allowed_hosts name a host the environment's network policy does not
// permit (credential_host_unreachable_error, exhausted: the turn does not
// start and the secret is not injected).
type CredentialError struct {
	CredentialID, VaultID, Host string
}

func (e *CredentialError) Error() string {
	return fmt.Sprintf("credential %s of vault %s allows host %q, which the environment's network policy does not permit", e.CredentialID, e.VaultID, e.Host)
}

func credentialFailure(err error) (failure, bool) {
	var ce *CredentialError
	if !errors.As(err, &ce) {
		return failure{}, false
	}
	return failure{errType: "credential_host_unreachable_error", message: ce.Error(), credentialID: ce.CredentialID, vaultID: ce.VaultID}, true
}
