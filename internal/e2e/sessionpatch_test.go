package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// TestSessionUpdateRules: PATCH changes a session's title and metadata
// and logs one session.updated naming them; an unchanged title logs
// nothing; a bad title is a 400; an archived session is read-only (409),
// for updates and resources alike, and can still be deleted.
func TestSessionUpdateRules(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "cloud")
	sess := s.newSession(t, a.ID, env.ID)

	got, err := s.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Title: anthropic.String("renamed"), Metadata: map[string]string{"k": "v"}})
	if err != nil || got.Title != "renamed" || got.Metadata["k"] != "v" {
		t.Fatalf("update: %+v %v", got, err)
	}
	if _, err := s.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Title: anthropic.String("renamed")}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{Types: []anthropic.BetaManagedAgentsSessionEventType{"session.updated"}})
	if err != nil || len(evs.Data) != 1 || !strings.Contains(evs.Data[0].RawJSON(), `"renamed"`) {
		t.Fatalf("session.updated events: %+v %v", evs, err)
	}
	_, err = s.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Title: anthropic.String(strings.Repeat("x", 1025))})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")

	if _, err := s.client.Beta.Sessions.Archive(ctx, sess.ID, anthropic.BetaSessionArchiveParams{}); err != nil {
		t.Fatal(err)
	}
	_, err = s.client.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Title: anthropic.String("again")})
	apiErr(t, err, http.StatusConflict, "invalid_request_error")
	f, err := s.client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader("x"), "x.txt", "text/plain")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.client.Beta.Sessions.Resources.Add(ctx, sess.ID, anthropic.BetaSessionResourceAddParams{
		BetaManagedAgentsFileResourceParams: anthropic.BetaManagedAgentsFileResourceParams{FileID: f.ID},
	})
	apiErr(t, err, http.StatusConflict, "invalid_request_error")
	if _, err := s.client.Beta.Sessions.Delete(ctx, sess.ID, anthropic.BetaSessionDeleteParams{}); err != nil {
		t.Fatal(err)
	}
	_, err = s.client.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	apiErr(t, err, http.StatusNotFound, "not_found_error")
}
