package ids

// Prefixes of memory identifiers.
const (
	MemoryStore   = "memstore_"
	Memory        = "mem_"
	MemoryVersion = "memver_"
)

// Dream starts the ids of dreams.
const Dream = "drm_"
