package executorhub

import (
	"fmt"
	"sync"

	"github.com/reinsdev/reins/executor"
)

// RevokeCredential closes at once every connection whose executor token
// was exchanged for the environment key or machine token whose hash
// ([HashSecret]) is credentialHash, and ends their leases (their sessions
// are placed again). Tokens issued for it are refused from now on, since
// the hub checks the credential again at every connect. The executors are
// told reason with close code 4001: they ask the token endpoint for a new
// token, are refused, and stop.
func (h *Hub) RevokeCredential(credentialHash, reason string) int {
	if credentialHash == "" {
		return 0
	}
	return h.cut(func(c *hubConn) bool { return c.credential == credentialHash }, reason)
}

// DisconnectEnvironment closes the connections of the outside executors of
// an environment (for example when it is archived) as [Hub.RevokeCredential]
// does. In-process executors stay.
func (h *Hub) DisconnectEnvironment(environmentID, reason string) int {
	return h.cut(func(c *hubConn) bool {
		return c.credential != "" && c.principal.EnvironmentID == environmentID
	}, reason)
}

// cut closes the connections that match, ending their leases and taking
// them out of placement first, so that no session is placed on them
// meanwhile. It returns how many it closed.
func (h *Hub) cut(match func(*hubConn) bool, reason string) int {
	h.mu.Lock()
	var conns []*hubConn
	for c := range h.conns {
		if !match(c) {
			continue
		}
		conns = append(conns, c)
		for _, l := range c.leases {
			h.endLeaseLocked(l, leaseLost, fmt.Errorf("%w: %s", ErrToolOutcomeUnknown, reason), "")
		}
		if c.registered {
			h.unregisterLocked(c)
			h.broadcastLocked(c.principal.scope())
		}
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { c.close(executor.CloseTokenExpired, reason) })
	}
	wg.Wait()
	if len(conns) > 0 {
		h.logger.Info("executor connections closed", "count", len(conns), "reason", reason)
	}
	return len(conns)
}
