package ids

// Prefixes of vault identifiers.
const (
	Vault      = "vlt_"
	Credential = "vcrd_"
)
