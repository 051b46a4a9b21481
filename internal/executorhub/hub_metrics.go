package executorhub

// Connections returns the number of open executor connections, registered
// or not yet: a gauge for the server's metrics.
func (h *Hub) Connections() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}
