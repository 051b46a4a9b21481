package store

import "fmt"

// SchemaTooNewError is returned, wrapped, when a database's schema was
// migrated by a newer reins than this binary: its recorded version is
// beyond the last migration this binary knows. Serving such a database
// could write rows the newer schema does not expect, so it is refused.
type SchemaTooNewError struct {
	Database int // the highest migration recorded in the database
	Binary   int // the highest migration this binary knows
}

func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("the database's schema is at version %d, newer than this reins binary knows (version %d): "+
		"it was upgraded by a newer reins; run that version, or restore the backup taken before the upgrade (see docs/operations.md)",
		e.Database, e.Binary)
}

// SealedRef names a blob sealed under the master key that the store
// keeps, so that the caller can rebuild the additional data it was sealed
// with: a credential's secrets (CredentialID; a webhook endpoint's
// signing secret, sealed with the endpoint's id, is named there too), or
// a session resource's repository token (SessionID and ResourceID).
type SealedRef struct {
	CredentialID          string
	SessionID, ResourceID string
}
