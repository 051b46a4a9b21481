package ids

// Prefixes of memory identifiers.
const (
	MemoryStore   = "memstore_"
	Memory        = "mem_"
	MemoryVersion = "memver_"
)
