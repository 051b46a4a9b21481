package managedagents

// Dream is an asynchronous job that reads a memory store and past
// sessions, and writes a reorganized version of the store: into a new
// store (create_new) or into the input store (update_existing). It runs
// as a session, SessionID.
type Dream struct {
	ID     string `json:"id"`
	Type   string `json:"type"` // "dream"
	Status string `json:"status"`
	// Inputs are one memory_store input and one sessions input, in the
	// order the create request gave them.
	Inputs []DreamInput `json:"inputs"`
	// Outputs holds the memory store the dream writes, once it runs.
	Outputs        []DreamOutput       `json:"outputs"`
	Model          DreamModel          `json:"model"`
	Instructions   *string             `json:"instructions"`
	OutputBehavior DreamOutputBehavior `json:"output_behavior"`
	// SessionID is the session that runs the dream (nil until it
	// starts).
	SessionID  *string     `json:"session_id"`
	Usage      DreamUsage  `json:"usage"`
	Error      *DreamError `json:"error"`
	CreatedAt  string      `json:"created_at"`
	EndedAt    *string     `json:"ended_at"`
	ArchivedAt *string     `json:"archived_at"`
}

// Dream statuses: pending and running, then one of the final three.
const (
	DreamPending   = "pending"
	DreamRunning   = "running"
	DreamCompleted = "completed"
	DreamFailed    = "failed"
	DreamCanceled  = "canceled"
)

// DreamStatuses are the statuses of a dream, in lifecycle order.
var DreamStatuses = []string{DreamPending, DreamRunning, DreamCompleted, DreamFailed, DreamCanceled}

// Ended reports whether the dream's status is final (completed, failed
// or canceled).
func (d *Dream) Ended() bool {
	return d.Status != DreamPending && d.Status != DreamRunning
}

// Dream input types.
const (
	DreamInputMemoryStore = "memory_store"
	DreamInputSessions    = "sessions"
)

// DreamInput is a source a dream reads: {type:"memory_store",
// memory_store_id} or {type:"sessions", session_ids}.
type DreamInput struct {
	Type          string   `json:"type"`
	MemoryStoreID string   `json:"memory_store_id,omitempty"`
	SessionIDs    []string `json:"session_ids,omitempty"`
}

// DreamOutput is the memory store that holds a dream's result.
type DreamOutput struct {
	Type          string `json:"type"` // "memory_store"
	MemoryStoreID string `json:"memory_store_id"`
}

// DreamModel is the model that runs a dream; Speed is "standard".
type DreamModel struct {
	ID    string `json:"id"`
	Speed string `json:"speed"`
}

// Dream output behaviours.
const (
	DreamCreateNew      = "create_new"
	DreamUpdateExisting = "update_existing"
)

// DreamOutputBehavior is where a dream writes: {type:"create_new"} or
// {type:"update_existing", memory_store_id}.
type DreamOutputBehavior struct {
	Type          string `json:"type"`
	MemoryStoreID string `json:"memory_store_id,omitempty"`
}

// DreamUsage counts the tokens of a dream's model calls.
type DreamUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// DreamError says why a dream failed.
type DreamError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// MemoryStoreInput returns the id of the dream's memory store input.
func (d *Dream) MemoryStoreInput() string {
	for _, in := range d.Inputs {
		if in.Type == DreamInputMemoryStore {
			return in.MemoryStoreID
		}
	}
	return ""
}

// SessionInputs returns the ids of the dream's sessions input.
func (d *Dream) SessionInputs() []string {
	for _, in := range d.Inputs {
		if in.Type == DreamInputSessions {
			return in.SessionIDs
		}
	}
	return nil
}
