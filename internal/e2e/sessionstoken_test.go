package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/scripted"
	"github.com/reinsdev/reins/internal/pgtest"
	ma "github.com/reinsdev/reins/managedagents"
)

// newMemoryStore makes a memory store holding one memory per path and
// content pair; it returns the store and the memories' ids by path.
func (s *server) newMemoryStore(t *testing.T, name string, pathContent ...string) (string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	ms, err := s.client.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	mems := map[string]string{}
	for i := 0; i+1 < len(pathContent); i += 2 {
		m, err := s.client.Beta.MemoryStores.Memories.New(ctx, ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{
			Path: pathContent[i], Content: anthropic.String(pathContent[i+1])})
		if err != nil {
			t.Fatal(err)
		}
		mems[pathContent[i]] = m.ID
	}
	return ms.ID, mems
}

// newMemorySession creates a session of the agent in the environment
// with the memory_store resources.
func (s *server) newMemorySession(t *testing.T, agentID, envID string, res ...anthropic.BetaSessionNewParamsResourceUnion) *anthropic.BetaManagedAgentsSession {
	t.Helper()
	sess, err := s.client.Beta.Sessions.New(context.Background(), anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)}, EnvironmentID: envID, Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// workerResults are the processed user.tool_result events of frames: the
// results a pull worker sent.
func workerResults(frames []frame) []frame {
	var out []frame
	for _, f := range frames {
		if f.Type == ma.EventUserToolResult && f.ProcessedAt != nil {
			out = append(out, f)
		}
	}
	return out
}

// TestOfficialWorkerSyncsMemory: the official SDK's EnvironmentWorker,
// unmodified, serves a self-hosted session with a read_write memory
// store, authorized by the sessions token in its work item's secret. It
// downloads the store's memory under the resource's mount_path, where
// the agent reads it with the worker's read tool; the agent's new file
// reaches the store as a memory whose version's actor is session_actor
// with the session's id; a change made over the API reaches the worker's
// files, and the agent reads it in a later turn.
func TestOfficialWorkerSyncsMemory(t *testing.T) {
	if err := os.MkdirAll(ma.MemoryMountRoot, 0o755); err != nil {
		t.Skipf("the worker mounts memory stores under %s, which this host cannot create: %v", ma.MemoryMountRoot, err)
	}
	s := start(t, options{})
	ctx := context.Background()
	envID, key := s.selfHosted(t, "pull")
	// A name of its own: its mount path must not exist when the worker
	// starts.
	storeID, mems := s.newMemoryStore(t, "Token Notes "+ids.New(""), "/notes.md", "the answer is 42\n")
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newMemorySession(t, a.ID, envID, memoryResource(storeID, "read_write", ""))
	mount := sess.Resources[0].MountPath
	if !strings.HasPrefix(mount, ma.MemoryMountRoot+"/token-notes-") {
		t.Fatalf("mount path %q", mount)
	}
	t.Cleanup(func() { os.RemoveAll(mount) })
	st := s.openStream(t, sess.ID)

	// The worker ends an item once its session is idle for a second,
	// syncing the store one last time; the next turn is a new item,
	// which downloads the store again.
	wctx, cancel := context.WithCancel(ctx)
	idle := time.Second
	worker := environments.NewEnvironmentWorker(anthropic.NewClient(option.WithBaseURL(s.url), option.WithMaxRetries(0)),
		environments.EnvironmentWorkerOptions{EnvironmentID: envID, EnvironmentKey: key, Workdir: t.TempDir(), MaxIdle: &idle,
			MemorySyncInterval: environments.MinMemorySyncInterval, Logger: slog.New(slog.DiscardHandler)})
	done := make(chan error, 1)
	go func() { done <- worker.Run(wctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()

	notes, learned := filepath.Join(mount, "notes.md"), filepath.Join(mount, "learned.md")
	turn := func(script string) []frame {
		t.Helper()
		s.send(t, sess.ID, userMessage(script))
		got := workerResults(st.until(func(f frame) bool { return isIdle(f) && f.StopReason.Type == "end_turn" }))
		for _, r := range got {
			if r.IsError != nil && *r.IsError {
				t.Fatalf("tool failed: %+v", r.Content)
			}
		}
		return got
	}
	got := turn(`@tool read {"file_path":"` + notes + `"}` + "\n" +
		`@tool write {"file_path":"` + learned + `","content":"learned in turn 1\n"}` + "\n@then noted")
	if len(got) != 2 || !strings.Contains(got[0].Content[0].Text+got[1].Content[0].Text, "the answer is 42") {
		t.Fatalf("the agent did not read the store's memory: %+v", got)
	}

	// The worker uploads the new file: a memory written by the session.
	var written *anthropic.BetaManagedAgentsMemory
	for deadline := time.Now().Add(20 * time.Second); written == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent's file did not reach the store")
		}
		page, err := s.client.Beta.MemoryStores.Memories.List(ctx, storeID, anthropic.BetaMemoryStoreMemoryListParams{
			View: anthropic.BetaManagedAgentsMemoryViewFull})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Data {
			if m.Path == "/learned.md" {
				mem := m.AsMemory()
				written = &mem
			}
		}
	}
	if written.Content != "learned in turn 1\n" {
		t.Fatalf("uploaded memory %+v", written)
	}
	versions, err := s.client.Beta.MemoryStores.MemoryVersions.List(ctx, storeID, anthropic.BetaMemoryStoreMemoryVersionListParams{
		MemoryID: anthropic.String(written.ID)})
	if err != nil || len(versions.Data) != 1 {
		t.Fatalf("versions of the uploaded memory: %+v %v", versions, err)
	}
	if by := versions.Data[0].CreatedBy; by.Type != "session_actor" || by.SessionID != sess.ID {
		t.Fatalf("the upload's version was created by %+v, want session_actor %s", by, sess.ID)
	}

	// Once the item ended, a change over the API; the next turn's item
	// downloads it.
	s.waitWorkState(t, envID, "stopped")
	if _, err := s.client.Beta.MemoryStores.Memories.Update(ctx, mems["/notes.md"], anthropic.BetaMemoryStoreMemoryUpdateParams{
		MemoryStoreID: storeID, Content: anthropic.String("the answer is 43\n")}); err != nil {
		t.Fatal(err)
	}
	got = turn(`@tool read {"file_path":"` + notes + `"}` + "\n" + `@tool read {"file_path":"` + learned + `"}` + "\n@then read again")
	texts := got[0].Content[0].Text + got[1].Content[0].Text
	if len(got) != 2 || !strings.Contains(texts, "the answer is 43") || strings.Contains(texts, "42") || !strings.Contains(texts, "learned in turn 1") {
		t.Fatalf("second turn read %q", texts)
	}
}

// pollToken polls the environment's work queue with its key and returns
// the item handed out and the sessions token its secret carries; the item
// must be the session's.
func pollToken(t *testing.T, url, envID, envKey, sessionID string) (workID, token string) {
	t.Helper()
	c := anthropic.NewClient(option.WithBaseURL(url), option.WithAuthToken(envKey), option.WithHeaderDel("x-api-key"), option.WithMaxRetries(0))
	w, err := c.Beta.Environments.Work.Poll(context.Background(), envID, anthropic.BetaEnvironmentWorkPollParams{})
	if err != nil || w == nil || w.ID == "" || w.Data.ID != sessionID {
		t.Fatalf("poll: %+v %v; want the item of session %s", w, err, sessionID)
	}
	raw, err := base64.RawURLEncoding.DecodeString(w.Secret)
	var payload struct {
		SessionsToken string `json:"sessions_token"`
	}
	if err != nil || json.Unmarshal(raw, &payload) != nil || payload.SessionsToken == "" {
		t.Fatalf("secret %q: %v", w.Secret, err)
	}
	return w.ID, payload.SessionsToken
}

// tokenClient is an SDK client that authenticates with a sessions token,
// as the official worker does.
func tokenClient(url, token string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(url), option.WithAuthToken(token), option.WithHeaderDel("x-api-key"), option.WithMaxRetries(0))
}

// TestSessionsTokenScope: with the official Go SDK, a sessions token from
// a work item's secret reads its session and events, heartbeats its own
// work item, and lists, reads, creates, updates and deletes the memories
// of the stores attached to its session read_write (its writes recorded
// as session_actor); it reads a read_only store but cannot change it (403
// permission_error). Another session, another work item and a store not
// attached are not found; listing or managing stores, their versions,
// agents, environments, the work queue, new sessions and events that
// drive a session are 403. Once its session is archived, or deleted, the
// environment key that polled it revoked or its environment archived, the
// token is refused (401).
func TestSessionsTokenScope(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	envID, envKey := s.selfHosted(t, "pull")
	rw, rwMems := s.newMemoryStore(t, "rw", "/a.md", "alpha")
	ro, roMems := s.newMemoryStore(t, "ro", "/b.md", "beta")
	other, otherMems := s.newMemoryStore(t, "other", "/c.md", "gamma")
	var skills [2]*anthropic.BetaSkill
	for i, name := range []string{"its-skill", "not-its-skill"} {
		sk, err := s.client.Beta.Skills.New(ctx, anthropic.BetaSkillNewParams{Files: skillFiles(name+"/SKILL.md", skillMD(name, "A skill."))})
		if err != nil {
			t.Fatal(err)
		}
		skills[i] = sk
	}
	a, err := s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "scoped", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
		Tools:  []anthropic.BetaAgentNewParamsToolUnion{toolset(false)},
		Skills: []anthropic.BetaManagedAgentsSkillParamsUnion{anthropic.BetaManagedAgentsSkillParamsOfCustom(skills[0].ID)}})
	if err != nil {
		t.Fatal(err)
	}
	sess := s.newMemorySession(t, a.ID, envID, memoryResource(rw, "read_write", ""), memoryResource(ro, "read_only", ""))
	workID, token := pollToken(t, s.url, envID, envKey, sess.ID)
	otherSess := s.newMemorySession(t, a.ID, envID, memoryResource(other, "read_write", ""))
	otherWork, otherToken := pollToken(t, s.url, envID, envKey, otherSess.ID)
	c := tokenClient(s.url, token)
	mems := c.Beta.MemoryStores.Memories

	// Allowed.
	if got, err := c.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{}); err != nil || got.ID != sess.ID {
		t.Fatalf("get its session: %v", err)
	}
	if _, err := c.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{}); err != nil {
		t.Fatalf("list its events: %v", err)
	}
	if _, err := c.Beta.Environments.Work.Ack(ctx, workID, anthropic.BetaEnvironmentWorkAckParams{EnvironmentID: envID}); err != nil {
		t.Fatalf("ack its work item: %v", err)
	}
	if hb, err := c.Beta.Environments.Work.Heartbeat(ctx, workID, anthropic.BetaEnvironmentWorkHeartbeatParams{
		EnvironmentID: envID, ExpectedLastHeartbeat: anthropic.String("NO_HEARTBEAT")}); err != nil || !hb.LeaseExtended {
		t.Fatalf("heartbeat its work item: %+v %v", hb, err)
	}
	if _, err := c.Beta.Environments.Work.Get(ctx, workID, anthropic.BetaEnvironmentWorkGetParams{EnvironmentID: envID}); err != nil {
		t.Fatalf("get its work item: %v", err)
	}
	if v, err := c.Beta.Skills.Versions.Get(ctx, skills[0].LatestVersionID, anthropic.BetaSkillVersionGetParams{SkillID: skills[0].ID}); err != nil || v.SkillID != skills[0].ID {
		t.Fatalf("read a version of its agent's skill: %+v %v", v, err)
	}
	for _, id := range []string{rw, ro} {
		page, err := mems.List(ctx, id, anthropic.BetaMemoryStoreMemoryListParams{View: anthropic.BetaManagedAgentsMemoryViewFull})
		if err != nil || len(page.Data) != 1 || page.Data[0].Content == "" {
			t.Fatalf("list the memories of %s: %+v %v", id, page, err)
		}
	}
	if m, err := mems.Get(ctx, roMems["/b.md"], anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: ro}); err != nil || m.Content != "beta" {
		t.Fatalf("read a read_only memory: %+v %v", m, err)
	}
	created, err := mems.New(ctx, rw, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/new.md", Content: anthropic.String("new")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mems.Update(ctx, rwMems["/a.md"], anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: rw,
		Content: anthropic.String("alpha 2"), Precondition: anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: anthropic.String(sha256Hex("alpha"))}}); err != nil {
		t.Fatal(err)
	}
	if _, err := mems.Delete(ctx, created.ID, anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: rw,
		ExpectedContentSha256: anthropic.String(sha256Hex("new"))}); err != nil {
		t.Fatal(err)
	}
	versions, err := s.client.Beta.MemoryStores.MemoryVersions.List(ctx, rw, anthropic.BetaMemoryStoreMemoryVersionListParams{SessionID: anthropic.String(sess.ID)})
	if err != nil || len(versions.Data) != 3 {
		t.Fatalf("versions written by the session: %+v %v", versions, err)
	}
	for _, v := range versions.Data {
		if v.CreatedBy.Type != "session_actor" || v.CreatedBy.SessionID != sess.ID {
			t.Fatalf("version %s (%s) created by %+v", v.ID, v.Operation, v.CreatedBy)
		}
	}

	// Refused.
	says := func(err error, status int, typ, text string) {
		t.Helper()
		apiErr(t, err, status, typ)
		if !strings.Contains(err.Error(), text) {
			t.Fatalf("error does not say %q: %v", text, err)
		}
	}
	_, err = mems.New(ctx, ro, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/x.md", Content: anthropic.String("x")})
	says(err, 403, "permission_error", "read_only")
	_, err = mems.Update(ctx, roMems["/b.md"], anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: ro, Content: anthropic.String("x")})
	says(err, 403, "permission_error", "read_only")
	_, err = mems.Delete(ctx, roMems["/b.md"], anthropic.BetaMemoryStoreMemoryDeleteParams{MemoryStoreID: ro})
	says(err, 403, "permission_error", "read_only")
	_, err = mems.List(ctx, other, anthropic.BetaMemoryStoreMemoryListParams{})
	says(err, 404, "not_found_error", other)
	_, err = mems.Get(ctx, otherMems["/c.md"], anthropic.BetaMemoryStoreMemoryGetParams{MemoryStoreID: other})
	says(err, 404, "not_found_error", other)
	_, err = mems.New(ctx, other, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/x.md", Content: anthropic.String("x")})
	says(err, 404, "not_found_error", other)
	_, err = c.Beta.Sessions.Get(ctx, otherSess.ID, anthropic.BetaSessionGetParams{})
	says(err, 404, "not_found_error", otherSess.ID)
	_, err = c.Beta.Sessions.Events.List(ctx, otherSess.ID, anthropic.BetaSessionEventListParams{})
	says(err, 404, "not_found_error", otherSess.ID)
	_, err = c.Beta.Skills.Versions.Get(ctx, skills[1].LatestVersionID, anthropic.BetaSkillVersionGetParams{SkillID: skills[1].ID})
	says(err, 404, "not_found_error", skills[1].ID)
	_, err = c.Beta.Environments.Work.Get(ctx, otherWork, anthropic.BetaEnvironmentWorkGetParams{EnvironmentID: envID})
	says(err, 404, "not_found_error", otherWork)
	// The versions of its stores are readable (`reins executor` reads the
	// newest to know whether a store changed), not redactable.
	vs, err := c.Beta.MemoryStores.MemoryVersions.List(ctx, rw, anthropic.BetaMemoryStoreMemoryVersionListParams{})
	if err != nil || len(vs.Data) == 0 {
		t.Fatalf("versions of its store: %v %v", vs, err)
	}
	_, err = c.Beta.MemoryStores.MemoryVersions.List(ctx, other, anthropic.BetaMemoryStoreMemoryVersionListParams{})
	says(err, 404, "not_found_error", other)
	denied := []error{}
	add := func(_ any, err error) { denied = append(denied, err) }
	add(c.Beta.MemoryStores.MemoryVersions.Redact(ctx, vs.Data[0].ID, anthropic.BetaMemoryStoreMemoryVersionRedactParams{MemoryStoreID: rw}))
	add(c.Beta.MemoryStores.List(ctx, anthropic.BetaMemoryStoreListParams{}))
	add(c.Beta.MemoryStores.Get(ctx, rw, anthropic.BetaMemoryStoreGetParams{}))
	add(c.Beta.MemoryStores.Update(ctx, rw, anthropic.BetaMemoryStoreUpdateParams{Name: anthropic.String("mine")}))
	add(c.Beta.MemoryStores.Archive(ctx, rw, anthropic.BetaMemoryStoreArchiveParams{}))
	add(c.Beta.MemoryStores.New(ctx, anthropic.BetaMemoryStoreNewParams{Name: "mine"}))
	add(c.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{}))
	add(c.Beta.Skills.List(ctx, anthropic.BetaSkillListParams{}))
	add(c.Beta.Environments.List(ctx, anthropic.BetaEnvironmentListParams{}))
	add(c.Beta.Environments.Work.Poll(ctx, envID, anthropic.BetaEnvironmentWorkPollParams{}))
	add(c.Beta.Environments.Work.Update(ctx, workID, anthropic.BetaEnvironmentWorkUpdateParams{EnvironmentID: envID,
		BetaSelfHostedWorkUpdateRequest: anthropic.BetaSelfHostedWorkUpdateRequestParam{Metadata: map[string]string{"k": "v"}}}))
	add(c.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{}))
	add(c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)}, EnvironmentID: envID}))
	add(c.Beta.Sessions.Update(ctx, sess.ID, anthropic.BetaSessionUpdateParams{Title: anthropic.String("mine")}))
	add(c.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("hi")}}))
	for i, err := range denied {
		if err == nil {
			t.Fatalf("call %d was allowed", i)
		}
		apiErr(t, err, 403, "permission_error")
	}

	// Archived, or deleted: refused.
	if _, err := s.client.Beta.Sessions.Archive(ctx, sess.ID, anthropic.BetaSessionArchiveParams{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
	says(err, 401, "authentication_error", "archived")
	_, err = mems.List(ctx, rw, anthropic.BetaMemoryStoreMemoryListParams{})
	says(err, 401, "authentication_error", "archived")
	oc := tokenClient(s.url, otherToken)
	if _, err := oc.Beta.MemoryStores.Memories.List(ctx, other, anthropic.BetaMemoryStoreMemoryListParams{}); err != nil {
		t.Fatalf("the other session's token, on its own store: %v", err)
	}
	if _, err := s.client.Beta.Sessions.Delete(ctx, otherSess.ID, anthropic.BetaSessionDeleteParams{}); err != nil {
		t.Fatal(err)
	}
	_, err = oc.Beta.MemoryStores.Memories.List(ctx, other, anthropic.BetaMemoryStoreMemoryListParams{})
	says(err, 401, "authentication_error", "deleted")

	// The environment key that polled it revoked, or its environment
	// archived: refused.
	env2, key1 := s.selfHosted(t, "pull 2")
	var key2 struct{ ID, Key string }
	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+env2+"/keys", nil, &key2); err != nil {
		t.Fatal(err)
	}
	var keys struct{ Data []struct{ ID string } }
	if _, err := call(s.url, s.key, "GET", "/v1/environments/"+env2+"/keys", nil, &keys); err != nil || len(keys.Data) != 2 {
		t.Fatalf("keys: %+v %v", keys, err)
	}
	s3, s4 := s.newSession(t, a.ID, env2), s.newSession(t, a.ID, env2)
	_, t3 := pollToken(t, s.url, env2, key1, s3.ID)
	_, t4 := pollToken(t, s.url, env2, key2.Key, s4.ID)
	get := func(token, id string) error {
		c := tokenClient(s.url, token)
		_, err := c.Beta.Sessions.Get(ctx, id, anthropic.BetaSessionGetParams{})
		return err
	}
	if err := errors.Join(get(t3, s3.ID), get(t4, s4.ID)); err != nil {
		t.Fatal(err)
	}
	firstKey := keys.Data[0].ID
	if firstKey == key2.ID {
		firstKey = keys.Data[1].ID
	}
	if _, err := call(s.url, s.key, "POST", "/v1/environments/"+env2+"/keys/"+firstKey+"/revoke", nil, nil); err != nil {
		t.Fatal(err)
	}
	says(get(t3, s3.ID), 401, "authentication_error", "revoked")
	if err := get(t4, s4.ID); err != nil {
		t.Fatalf("the token of another key after a revocation: %v", err)
	}
	if _, err := s.client.Beta.Environments.Archive(ctx, env2, anthropic.BetaEnvironmentArchiveParams{}); err != nil {
		t.Fatal(err)
	}
	says(get(t4, s4.ID), 401, "authentication_error", "archived")
}

// TestSessionsTokenAcrossReplicas: a sessions token handed out by one
// replica works on another sharing its PostgreSQL database, and stops
// working on both once its session is deleted on either.
func TestSessionsTokenAcrossReplicas(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	m := &scripted.Provider{}
	a := startReplica(t, dsn, "replica-a", m)
	b := startWith(t, options{models: model.Router{"scripted": m}}, func(c *app.Config) {
		c.DatabaseURL, c.ReplicaID, c.LeaseTTL = dsn, "replica-b", replicaTTL
	})
	ctx := context.Background()
	envID, envKey := a.selfHosted(t, "pull")
	storeID, _ := a.newMemoryStore(t, "shared", "/a.md", "alpha")
	agent := a.newAgent(t, "scripted", toolset(false))
	sess := a.newMemorySession(t, agent.ID, envID, memoryResource(storeID, "read_write", ""))
	_, token := pollToken(t, a.url, envID, envKey, sess.ID)
	for _, r := range []*server{a, b} {
		c := tokenClient(r.url, token)
		if page, err := c.Beta.MemoryStores.Memories.List(ctx, storeID, anthropic.BetaMemoryStoreMemoryListParams{}); err != nil || len(page.Data) != 1 {
			t.Fatalf("the token on %s: %+v %v", r.url, page, err)
		}
	}
	if _, err := b.client.Beta.Sessions.Delete(ctx, sess.ID, anthropic.BetaSessionDeleteParams{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*server{a, b} {
		c := tokenClient(r.url, token)
		_, err := c.Beta.Sessions.Get(ctx, sess.ID, anthropic.BetaSessionGetParams{})
		apiErr(t, err, 401, "authentication_error")
	}
}
