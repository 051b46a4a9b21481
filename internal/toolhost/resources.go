package toolhost

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
)

// resourcePiece is the file content one placing command carries (its
// base64 stays well under an executor frame).
const resourcePiece = store.FileChunk

// placedResources is, per session, the resources placed in the workspace
// of its current placement: resource id → path relative to the workspace.
type placedResources map[string]map[string]string

// syncResources places the session's file resources and skills that its
// workspace lacks and removes the resources deleted since, with the session's own bash tool
// (so that it works the same in a sandbox and on a self-hosted executor,
// as the sandbox's user). A failure is the tool result the model gets;
// a repository that cannot be cloned is not one: the tool runs without it
// and repoErrs says why (see cloneRepository).
func (t *Host) syncResources(ctx context.Context, sess *ma.Session) (repoErrs []ma.SessionError, failed *tool.Result) {
	res, err := sessions.Resources(sess)
	if err != nil {
		return nil, errorResult(err)
	}
	t.mu.Lock()
	placed := t.resources[sess.ID]
	if placed == nil && len(res) == 0 && len(sess.Agent.Skills) == 0 {
		t.mu.Unlock()
		return nil, nil
	}
	if placed == nil {
		placed = map[string]string{}
		t.resources[sess.ID] = placed
	}
	t.mu.Unlock()
	want := map[string]bool{}
	for _, r := range res {
		if r.Type == "memory_store" {
			continue // mounted under /mnt/memory, not placed in the workspace
		}
		want[r.ID] = true
		if _, ok := placed[r.ID]; ok {
			continue
		}
		rel, err := sessions.MountPath(r.MountPath)
		if err != nil {
			return repoErrs, errorResult(fmt.Errorf("resource %s: %w", r.ID, err))
		}
		switch r.Type {
		case "github_repository":
			if e, ok := t.cloneRepository(ctx, sess, r, rel); !ok {
				if e != nil {
					repoErrs = append(repoErrs, *e)
				}
				continue // not placed: tried again at the next call
			}
		default:
			if err := t.placeFile(ctx, sess, r.FileID, rel); err != nil {
				return repoErrs, errorResult(fmt.Errorf("could not place file %s at %s: %w", r.FileID, r.MountPath, err))
			}
		}
		t.mu.Lock()
		placed[r.ID] = rel
		t.mu.Unlock()
	}
	for _, ref := range sess.Agent.Skills {
		key := skillKey(ref)
		want[key] = true
		if _, ok := placed[key]; ok {
			continue
		}
		rel, err := t.placeSkill(ctx, sess, ref)
		if errors.Is(err, store.ErrNotFound) {
			// Deleted since the session began: the system prompt
			// leaves it out too.
			t.log.Warn("a session's skill version was deleted; it is not placed", "session", sess.ID, "skill", ref.SkillID, "version", ref.Version)
			continue
		}
		if err != nil {
			return repoErrs, errorResult(fmt.Errorf("could not place skill %s: %w", ref.SkillID, err))
		}
		t.mu.Lock()
		placed[key] = rel
		t.mu.Unlock()
	}
	for id, rel := range placed {
		if want[id] {
			continue
		}
		if err := t.bash(ctx, sess, "rm -rf -- "+shellQuote(rel)); err != nil {
			return repoErrs, errorResult(fmt.Errorf("could not remove the deleted resource at %s: %w", rel, err))
		}
		t.mu.Lock()
		delete(placed, id)
		t.mu.Unlock()
	}
	return repoErrs, nil
}

// cloneRepository clones a github_repository resource at rel. When the
// clone fails, the session goes on without the repository: ok is false
// and e is the repository_*_error to log (retrying, as each later tool
// call tries again), or nil when the same error was logged already for
// this placement.
func (t *Host) cloneRepository(ctx context.Context, sess *ma.Session, r ma.SessionResource, rel string) (e *ma.SessionError, ok bool) {
	tokenVar := repositoryTokenVar(r.ID)
	if !t.hasSecret(sess.ID, tokenVar) {
		tokenVar = ""
	}
	err := t.bash(ctx, sess, cloneCommand(r, rel, tokenVar))
	if err == nil {
		t.mu.Lock()
		delete(t.reported[sess.ID], r.ID)
		t.mu.Unlock()
		return nil, true
	}
	typ := repositoryErrorType(err.Error())
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reported[sess.ID] == nil {
		t.reported[sess.ID] = map[string]string{}
	}
	if t.reported[sess.ID][r.ID] == typ {
		return nil, false
	}
	t.reported[sess.ID][r.ID] = typ
	return &ma.SessionError{Type: typ, RepositoryURL: r.URL, RetryStatus: ma.RetryStatus{Type: ma.RetryRetrying},
		Message: fmt.Sprintf("could not clone %s into %s (the session goes on without it; the next tool call tries again): %v", r.URL, r.MountPath, err)}, false
}

// repositoryErrorType reads git's output of a failed clone or checkout as
// one of the five repository error types.
func repositoryErrorType(out string) string {
	o := strings.ToLower(out)
	has := func(subs ...string) bool {
		return slices.ContainsFunc(subs, func(s string) bool { return strings.Contains(o, s) })
	}
	switch {
	case has("remote branch", "did not match any", "reference is not a tree", "unable to read tree", "not our ref", "couldn't find remote ref"):
		return ma.ErrorRepositoryCheckout
	case has("authentication failed", "could not read username", "could not read password", "returned error: 401", "terminal prompts disabled"):
		return ma.ErrorRepositoryAuthentication
	case has("returned error: 403", "permission denied", "access denied"):
		return ma.ErrorRepositoryForbidden
	case has("not found", "returned error: 404", "does not appear to be a git repository", "does not exist"):
		return ma.ErrorRepositoryNotFound
	}
	return ma.ErrorRepositoryClone
}

func errorResult(err error) *tool.Result {
	r := tool.ErrorResult("[reins] The session's resources could not be set up, so the tool did not run: " + err.Error())
	return &r
}

// placeFile writes a file's content at rel, read-only: piece by piece to a
// temporary name beside it, then renamed.
func (t *Host) placeFile(ctx context.Context, sess *ma.Session, fileID, rel string) error {
	f, err := t.st.GetFile(ctx, fileID)
	if err != nil {
		return err
	}
	dst, tmp := shellQuote(rel), shellQuote(rel+".reins-part")
	dir := "."
	if i := strings.LastIndex(rel, "/"); i > 0 {
		dir = rel[:i]
	}
	first := fmt.Sprintf("mkdir -p -- %s && rm -f -- %s %s && : > %s", shellQuote(dir), tmp, dst, tmp)
	if err := t.bash(ctx, sess, first); err != nil {
		return err
	}
	var piece []byte
	flush := func() error {
		if len(piece) == 0 {
			return nil
		}
		cmd := fmt.Sprintf("base64 -d >> %s <<'REINS_EOF'\n%s\nREINS_EOF", tmp, base64.StdEncoding.EncodeToString(piece))
		piece = piece[:0]
		return t.bash(ctx, sess, cmd)
	}
	for n := 0; int64(n)*store.FileChunk < f.SizeBytes; n++ {
		chunk, err := t.st.ReadFileChunk(ctx, fileID, n)
		if err != nil {
			return err
		}
		piece = append(piece, chunk...)
		if len(piece) >= resourcePiece {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return t.bash(ctx, sess, fmt.Sprintf("chmod 0444 %s && mv -f -- %s %s", tmp, tmp, dst))
}

// bash runs one command in the session's workspace root, in a subshell
// (the model's shell keeps its directory and variables).
func (t *Host) bash(ctx context.Context, sess *ma.Session, cmd string) error {
	input, _ := json.Marshal(map[string]any{"command": "( cd \"$HOME\" && " + cmd + "\n) && echo " + resourceOK, "timeout_ms": placeTimeout.Milliseconds()})
	res := t.runTool(ctx, sess, tool.Call{ID: ids.New("reins_resource_"), Name: "bash", Input: input})
	var out []string
	for _, b := range res.Content {
		out = append(out, b.Text)
	}
	text := strings.TrimSpace(strings.Join(out, "\n"))
	if res.IsError || !strings.HasSuffix(text, resourceOK) {
		return fmt.Errorf("%s", text)
	}
	return nil
}

// placeTimeout bounds one placing command (a clone); the bash tool caps
// it at its own maximum.
const placeTimeout = 10 * time.Minute

// resourceOK is what a placing command prints when it succeeded.
const resourceOK = "REINS_RESOURCE_OK"

// shellQuote quotes s for bash.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// cloneCommand clones a repository at rel, unless something is there
// already (the clone of an earlier placement, with the agent's changes).
// The clone goes through the sandbox's egress proxy even to hosts that
// no_proxy names: inside the sandbox those are its own loopback. With
// tokenVar, the variable of the repository's token, git answers an
// authentication challenge with it as the password (Basic, user
// x-access-token, as GitHub takes tokens); in a sandbox the variable holds
// a placeholder, which the egress proxy replaces for the repository's host.
// The clone keeps that credential helper, which names the variable (never
// its value), so the agent's later fetch and push authenticate too.
func cloneCommand(r ma.SessionResource, rel, tokenVar string) string {
	dst, tmp := shellQuote(rel), shellQuote(rel+".reins-part")
	var b strings.Builder
	fmt.Fprintf(&b, "if [ ! -e %s ]; then rm -rf -- %s && mkdir -p -- \"$(dirname -- %s)\" && ", dst, tmp, dst)
	b.WriteString(`NO_PROXY= no_proxy= GIT_TERMINAL_PROMPT=0 git -c http.proxy="${HTTP_PROXY:-}" -c advice.detachedHead=false `)
	b.WriteString("clone --quiet ")
	if tokenVar != "" {
		fmt.Fprintf(&b, `--config credential.helper= --config 'credential.helper=!f() { test "$1" = get && echo username=x-access-token && echo "password=$%s"; }; f' `, tokenVar)
	}
	if r.Checkout != nil && r.Checkout.Type == "branch" {
		fmt.Fprintf(&b, "--branch %s ", shellQuote(r.Checkout.Name))
	}
	fmt.Fprintf(&b, "-- %s %s 2>&1", shellQuote(r.URL), tmp)
	if r.Checkout != nil && r.Checkout.Type == "commit" {
		fmt.Fprintf(&b, " && git -C %s -c advice.detachedHead=false checkout --quiet %s 2>&1", tmp, shellQuote(r.Checkout.SHA))
	}
	fmt.Fprintf(&b, " && mv -- %s %s; fi", tmp, dst)
	return b.String()
}

// hasRepositories reports whether a session has github_repository
// resources (which may have tokens).
func hasRepositories(sess *ma.Session) bool {
	res, _ := sessions.Resources(sess)
	for _, r := range res {
		if r.Type == "github_repository" {
			return true
		}
	}
	return false
}

// repositoryTokens opens the tokens of the session's repositories, each a
// secret for its repository's host only, named by repositoryTokenVar.
func (t *Host) repositoryTokens(ctx context.Context, sess *ma.Session) ([]secret, error) {
	sealed, err := t.st.RepositoryTokens(ctx, sess.ID)
	if err != nil || len(sealed) == 0 {
		return nil, err
	}
	res, err := sessions.Resources(sess)
	if err != nil {
		return nil, err
	}
	var out []secret
	for _, r := range res {
		s, ok := sealed[r.ID]
		if !ok || r.Type != "github_repository" {
			continue
		}
		tok, err := t.keys.Open(s, sessions.RepositoryTokenAD(sess.ID, r.ID))
		if err != nil {
			return nil, fmt.Errorf("the token of resource %s: %w", r.ID, err)
		}
		u, err := url.Parse(r.URL)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", r.ID, err)
		}
		out = append(out, secret{name: repositoryTokenVar(r.ID), value: string(tok), hosts: []string{u.Hostname()}, header: true})
	}
	return out, nil
}

// repositoryTokenVar is the variable that holds a repository's token (a
// placeholder, in a sandbox) for its clone.
func repositoryTokenVar(resourceID string) string {
	return "REINS_REPOSITORY_TOKEN_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, resourceID)
}

// hasSecret reports whether the session's current placement was given
// the named secret.
func (t *Host) hasSecret(sessionID, name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.secrets[sessionID] {
		if s.name == name {
			return true
		}
	}
	return false
}

// RepositoryTokenChanged implements httpapi.Lifecycle: a session placed
// here with the repository's token gets the new one, in its redaction and
// in its sandbox's proxy (the variable keeps its placeholder). Without a
// sandbox the variable holds the old token until the next placement.
func (t *Host) RepositoryTokenChanged(ctx context.Context, sessionID, resourceID string) {
	name := repositoryTokenVar(resourceID)
	if !t.hasSecret(sessionID, name) {
		return // not placed here, or placed without it: the next placement reads the store
	}
	sess, err := t.st.GetSession(ctx, sessionID)
	if err != nil {
		t.log.Warn("rotate a repository token", "session", sessionID, "err", err)
		return
	}
	tokens, err := t.repositoryTokens(ctx, &sess)
	if err != nil {
		t.log.Warn("rotate a repository token", "session", sessionID, "err", err)
		return
	}
	for _, tok := range tokens {
		if tok.name != name {
			continue
		}
		t.mu.Lock()
		secrets := slices.Clone(t.secrets[sessionID])
		old := ""
		for i := range secrets {
			if secrets[i].name == name {
				old, secrets[i].value = secrets[i].value, tok.value
			}
		}
		t.secrets[sessionID] = secrets
		t.mu.Unlock()
		if t.sandboxes != nil && old != "" {
			t.sandboxes.rotateCredential(sessionID, old, tok.value)
		}
	}
}
