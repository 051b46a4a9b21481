package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	ma "github.com/reinsdev/reins/managedagents"
)

const (
	// lowOpenFiles is the open-file limit (soft and hard) of the server.
	lowOpenFiles = 256
	// lowFileStreams are asked of it on one key, far more than it has
	// files for.
	lowFileStreams = 400
	// lowFileWait bounds each request to it: a server out of files
	// accepts no connection, and its requests never get an answer.
	lowFileWait = 5 * time.Second
)

// TestOpenFileLimit: a reins serve started with an open-file limit of
// 256 and asked for 400 event streams of one key keeps its files for the
// health check and the API: /healthz answers while the streams are asked
// for, reads and sends while the streams it holds are open; the streams over what its limit allows
// are refused at once with 503 overloaded_error and retry-after (not
// left unanswered by a server that cannot accept connections), the open
// ones stay live, and once they close streams open again.
func TestOpenFileLimit(t *testing.T) {
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	args := append([]string{bin}, serveArgs(t.TempDir(), addr)...)
	cmd := exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, lowOpenFiles)}, args...)...)
	c := startChildCmd(t, cmd, addr, burstKey)
	t.Cleanup(func() { stopChild(t, c) })
	d := newDefaultsChild(t, c, &http.Client{Timeout: lowFileWait})
	agentID, envID := d.agentAndEnvironment(t)
	sess, err := d.newSession(context.Background(), agentID, envID)
	if err != nil {
		t.Fatal(err)
	}

	probes := make(chan []string, 1)
	stopProbes := make(chan struct{})
	go func() { probes <- probeHealth(d.hc, c.url, stopProbes) }()
	streams := openRawStreams(c.url, sess.ID, lowFileStreams)
	defer streams.close()
	close(stopProbes)
	if failed := <-probes; len(failed) > 0 {
		t.Errorf("/healthz failed %d times while the streams were asked for, e.g. %v", len(failed), failed[0])
	}
	if len(streams.failed) > 0 {
		t.Errorf("%d of %d streams neither opened nor were refused with 503 overloaded_error and retry-after, e.g. %v",
			len(streams.failed), lowFileStreams, streams.failed[:min(3, len(streams.failed))])
	}
	if len(streams.open) < lowOpenFiles/8 || len(streams.refused) == 0 {
		t.Errorf("%d streams open and %d refused, want some of each", len(streams.open), len(streams.refused))
	}
	d.checkAPI(t, sess.ID)
	// The open streams are live: each gets the message just sent.
	for i, s := range streams.open {
		if err := s.waitFor(ma.EventUserMessage); err != nil {
			t.Fatalf("open stream %d: %v", i, err)
		}
	}
	t.Logf("open-file limit %d: %d of %d streams opened, %d refused with 503 overloaded_error; /healthz, reads and sends answered meanwhile",
		lowOpenFiles, len(streams.open), lowFileStreams, len(streams.refused))

	streams.close()
	deadline := time.Now().Add(lowFileWait)
	for {
		again := openRawStreams(c.url, sess.ID, 1)
		again.close()
		if len(again.refused)+len(again.failed) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stream opens %s after the others closed: %v %v", lowFileWait, again.refused, again.failed)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// probeHealth gets /healthz every 50 ms until stop, and returns how the
// probes that did not get a 200 failed.
func probeHealth(hc *http.Client, url string, stop <-chan struct{}) []string {
	var failed []string
	for {
		select {
		case <-stop:
			return failed
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := hc.Get(url + "/healthz")
		if err != nil {
			failed = append(failed, err.Error())
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			failed = append(failed, resp.Status)
		}
	}
}

// checkAPI checks that the server answers /healthz, a read and a send,
// each within lowFileWait.
func (d *defaultsChild) checkAPI(t *testing.T, sessionID string) {
	t.Helper()
	resp, err := d.hc.Get(d.url + "/healthz")
	if err != nil {
		t.Fatalf("/healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %s", resp.Status)
	}
	ctx := context.Background()
	if _, err := d.client.Beta.Sessions.Get(ctx, sessionID, anthropic.BetaSessionGetParams{}); err != nil {
		t.Fatalf("get the session: %v", err)
	}
	if _, err := d.client.Beta.Sessions.Events.Send(ctx, sessionID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("still here")}}); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// rawStreams are event streams asked for at once: those opened, those
// refused with 503 overloaded_error and retry-after, and what went wrong
// with the others.
type rawStreams struct {
	open    []*rawStream
	refused []string
	failed  []string
}

// rawStream is an open event stream read as it comes.
type rawStream struct {
	resp *http.Response
	rd   *bufio.Reader
}

// openRawStreams asks for n event streams of the session, 16 at a time,
// each on its own connection.
func openRawStreams(url, sessionID string, n int) *rawStreams {
	out := &rawStreams{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, 16)
	for range n {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			s, refusal, err := openRawStream(url, sessionID)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				out.failed = append(out.failed, err.Error())
			case s == nil:
				out.refused = append(out.refused, refusal)
			default:
				out.open = append(out.open, s)
			}
		})
	}
	wg.Wait()
	return out
}

// openRawStream asks for one event stream: the stream, or the refusal's
// body for a 503 overloaded_error with retry-after, or an error.
func openRawStream(url, sessionID string) (*rawStream, string, error) {
	tr := &http.Transport{DisableKeepAlives: true, ResponseHeaderTimeout: lowFileWait}
	req, _ := http.NewRequest(http.MethodGet, url+"/v1/sessions/"+sessionID+"/events/stream", nil)
	req.Header.Set("x-api-key", burstKey)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode == http.StatusOK {
		return &rawStream{resp: resp, rd: bufio.NewReader(resp.Body)}, "", nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("retry-after") == "" ||
		!strings.Contains(string(body), `"type":"`+ma.ErrOverloaded+`"`) {
		return nil, "", fmt.Errorf("%s (retry-after %q): %s", resp.Status, resp.Header.Get("retry-after"), body)
	}
	return nil, string(body), nil
}

// waitFor reads the stream until an event of the type, within
// lowFileWait.
func (s *rawStream) waitFor(typ string) error {
	done := time.AfterFunc(lowFileWait, func() { s.resp.Body.Close() })
	defer done.Stop()
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			return fmt.Errorf("no %s: %w", typ, err)
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev ma.Event
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == typ {
			return nil
		}
	}
}

func (r *rawStreams) close() {
	for _, s := range r.open {
		s.resp.Body.Close()
	}
	r.open = nil
}
