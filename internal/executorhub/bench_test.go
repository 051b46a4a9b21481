package executorhub

import (
	"context"
	"strconv"
	"testing"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
)

func BenchmarkToolCall(b *testing.B) {
	key, hash := NewEnvironmentKey()
	creds := &memCredentials{envKeys: map[string]string{hash: "env_1"}}
	h := NewHub(HubOptions{Credentials: creds})
	n := newMemNet(h)
	c := executor.NewClient(executor.Options{URL: "http://x", HTTPClient: n.httpClient(), EnvironmentKey: key, Sessions: &testSessions{}, Capabilities: testCaps})
	go c.Run(context.Background())
	var l *Lease
	for {
		ch := h.Changed("env_1")
		var err error
		l, err = h.Assign(context.Background(), AssignRequest{EnvironmentID: "env_1", SessionID: "s", Tools: []string{"noop"}})
		if err == nil {
			break
		}
		<-ch
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.CallTool(context.Background(), tool.Call{ID: strconv.Itoa(i), Name: "noop"}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	c.Stop()
	<-c.Done()
	h.Stop(context.Background())
	n.close()
}
