package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// skillAPI serves the Skills API, and pins the skills of agents and
// sessions to versions.
type skillAPI struct {
	st store.Skills
	// spoolDir holds uploads while they arrive; maxSize bounds one.
	spoolDir string
	maxSize  int64
	log      *slog.Logger
}

// skillRoutes registers the Skills API.
func (s *Server) skillRoutes() {
	k := &skillAPI{st: s.cfg.Store, spoolDir: s.cfg.FileSpoolDir, maxSize: s.cfg.MaxFileSize, log: s.log}
	s.skills = k
	upload := k.maxSize + multipartSlack
	s.handle("POST /v1/skills", upload, k.createSkill)
	s.handle("GET /v1/skills", smallBody, k.listSkills)
	s.handle("GET /v1/skills/{id}", smallBody, k.getSkill)
	s.handle("DELETE /v1/skills/{id}", smallBody, noBody(k.deleteSkill))
	s.handle("POST /v1/skills/{id}/versions", upload, k.createSkillVersion)
	s.handle("GET /v1/skills/{id}/versions", smallBody, k.listSkillVersions)
	s.handle("GET /v1/skills/{id}/versions/{version}", smallBody, k.getSkillVersion)
	s.handle("DELETE /v1/skills/{id}/versions/{version}", smallBody, noBody(k.deleteSkillVersion))
	s.handle("GET /v1/skills/{id}/versions/{version}/content", smallBody, k.downloadSkillVersion)
}

// checkSkills checks that pinned skill versions still exist
// ([skillAPI.checkSkills]), for the session handlers.
func (s *Server) checkSkills(ctx context.Context, field string, refs []ma.SkillRef) error {
	return s.skills.checkSkills(ctx, field, refs)
}

// newVersion is the stored version of a checked upload and its archive.
func newVersion(skillID string, u *skillUpload, a *skillArchive, now time.Time) store.SkillVersion {
	return store.SkillVersion{SkillVersion: ma.SkillVersion{ID: strconv.FormatInt(now.UnixMicro(), 10), Type: "skill_version",
		SkillID: skillID, Name: u.name, Description: u.description, CreatedAt: ma.Time(now)}, SizeBytes: a.size, SHA256: a.sha256}
}

func (k *skillAPI) createSkill(w http.ResponseWriter, r *http.Request) error {
	u, err := k.readSkillUpload(r, true)
	if err != nil {
		return err
	}
	defer u.close()
	now := time.Now()
	a, err := u.archive(k.spoolDir, now)
	if err != nil {
		return err
	}
	defer a.close()
	id := ids.New(ids.Skill)
	v := newVersion(id, u, a, now)
	display := u.displayName
	if display == "" {
		display = u.name
	}
	sk := store.Skill{Skill: ma.Skill{ID: id, Type: "skill", DisplayName: display, LatestVersionID: v.ID,
		Source: ma.SkillSource{Type: "custom"}, CreatedAt: v.CreatedAt, UpdatedAt: v.CreatedAt}, Name: u.name}
	if err := k.st.CreateSkill(r.Context(), sk, v, a.f); err != nil {
		return err
	}
	writeJSON(w, sk.Skill)
	return nil
}

// getSkillOr404 reads a skill, answering 404 when there is none.
func (k *skillAPI) getSkillOr404(ctx context.Context, id string) (store.Skill, error) {
	sk, err := k.st.GetSkill(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return sk, notFound("skill %s not found", id)
	}
	return sk, err
}

func (k *skillAPI) getSkill(w http.ResponseWriter, r *http.Request) error {
	sk, err := k.getSkillOr404(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, sk.Skill)
	return nil
}

func (k *skillAPI) listSkills(w http.ResponseWriter, r *http.Request) error {
	lq, err := newestFirst(r)
	if err != nil {
		return err
	}
	source, err := query{r}.enum("source", "skill source", "custom", []string{"custom", "anthropic"})
	if err != nil {
		return err
	}
	var items []store.Item[store.Skill]
	if source == "custom" { // reins has no Anthropic skills
		if items, err = k.st.ListSkills(r.Context(), lq); err != nil {
			return err
		}
	}
	writePageOf(w, items, lq, "desc", func(sk store.Skill) ma.Skill { return sk.Skill })
	return nil
}

func (k *skillAPI) deleteSkill(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	err := k.st.DeleteSkill(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound("skill %s not found", id)
	case errors.Is(err, store.ErrConflict):
		return badRequest("skill %s still has versions: delete them first (DELETE /v1/skills/%s/versions/{version})", id, id)
	case err != nil:
		return err
	}
	writeJSON(w, ma.Deleted{ID: id, Type: "skill_deleted"})
	return nil
}

func (k *skillAPI) createSkillVersion(w http.ResponseWriter, r *http.Request) error {
	sk, err := k.getSkillOr404(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	u, err := k.readSkillUpload(r, false)
	if err != nil {
		return err
	}
	defer u.close()
	if u.name != sk.Name {
		return badRequest("SKILL.md: name %q is not this skill's name %q: every version of a skill has the name of its first", u.name, sk.Name)
	}
	now := time.Now()
	a, err := u.archive(k.spoolDir, now)
	if err != nil {
		return err
	}
	defer a.close()
	v, _, err := k.st.CreateSkillVersion(r.Context(), newVersion(sk.ID, u, a, now), a.f)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("skill %s not found", sk.ID)
	}
	if err != nil {
		return err
	}
	writeJSON(w, v.SkillVersion)
	return nil
}

func (k *skillAPI) listSkillVersions(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := k.getSkillOr404(r.Context(), id); err != nil {
		return err
	}
	lq, err := newestFirst(r)
	if err != nil {
		return err
	}
	items, err := k.st.ListSkillVersions(r.Context(), id, lq)
	if err != nil {
		return err
	}
	writePageOf(w, items, lq, "desc", func(v store.SkillVersion) ma.SkillVersion { return v.SkillVersion })
	return nil
}

// newestFirst reads the limit (1 to 1000, 20 by default) and page of a
// list that is newest first.
func newestFirst(r *http.Request) (store.ListQuery, error) {
	q := query{r}
	lq := store.ListQuery{Desc: true}
	var err error
	if lq.Limit, err = q.limit(20, 1000); err != nil {
		return lq, err
	}
	if page := q.str("page"); page != "" {
		c, err := decodeCursor(page, "desc")
		if err != nil {
			return lq, err
		}
		lq.After = c.Pos
	}
	return lq, nil
}

// skillVersion reads a version of a skill: a version id, or "latest"
// when latest is allowed. Every failure is a 400 or a 404 naming it.
func (k *skillAPI) skillVersion(ctx context.Context, field, skillID, version string, latest bool) (store.SkillVersion, error) {
	sk, err := k.getSkillOr404(ctx, skillID)
	if err != nil {
		return store.SkillVersion{}, fieldPrefix(field, err)
	}
	if latest && (version == "latest" || version == "") {
		if sk.LatestVersionID == "" {
			return store.SkillVersion{}, notFound("%sskill %s has no version (all were deleted)", field, skillID)
		}
		version = sk.LatestVersionID
	}
	if n, err := strconv.ParseInt(version, 10, 64); err != nil || n <= 0 {
		hint := ""
		if latest {
			hint = ` or "latest"`
		}
		return store.SkillVersion{}, badRequest("%sversion: must be a numeric version id%s; got %q", field, hint, version)
	}
	v, err := k.st.GetSkillVersion(ctx, skillID, version)
	if errors.Is(err, store.ErrNotFound) {
		return v, notFound("%sversion %s of skill %s not found", field, version, skillID)
	}
	return v, err
}

func (k *skillAPI) getSkillVersion(w http.ResponseWriter, r *http.Request) error {
	v, err := k.skillVersion(r.Context(), "", r.PathValue("id"), r.PathValue("version"), true)
	if err != nil {
		return err
	}
	writeJSON(w, v.SkillVersion)
	return nil
}

func (k *skillAPI) deleteSkillVersion(w http.ResponseWriter, r *http.Request) error {
	v, err := k.skillVersion(r.Context(), "", r.PathValue("id"), r.PathValue("version"), false)
	if err != nil {
		return err
	}
	err = k.st.DeleteSkillVersion(r.Context(), v.SkillID, v.ID)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("version %s of skill %s not found", v.ID, v.SkillID)
	}
	if err != nil {
		return err
	}
	writeJSON(w, ma.Deleted{ID: v.ID, Type: "skill_version_deleted"})
	return nil
}

// downloadSkillVersion answers with a version's files as a zip archive,
// under the directory named after the skill (<name>.zip).
func (k *skillAPI) downloadSkillVersion(w http.ResponseWriter, r *http.Request) error {
	v, err := k.skillVersion(r.Context(), "", r.PathValue("id"), r.PathValue("version"), true)
	if err != nil {
		return err
	}
	read := func(ctx context.Context, n int) ([]byte, error) {
		return k.st.ReadSkillChunk(ctx, v.SkillID, v.ID, n)
	}
	return streamContent(k.log, w, r, stored{what: fmt.Sprintf("skill %s version %s", v.SkillID, v.ID), size: v.SizeBytes, sha256: v.SHA256, read: read},
		"application/zip", v.Name+".zip")
}

// checkSkills checks that the skill versions an agent pins still exist.
func (k *skillAPI) checkSkills(ctx context.Context, field string, refs []ma.SkillRef) error {
	i, err := k.deletedSkill(ctx, refs)
	if err != nil || i < 0 {
		return err
	}
	return badRequest("%s[%d]: version %s of skill %s was deleted: update the agent's skills", field, i, refs[i].Version, refs[i].SkillID)
}

// deletedSkill returns the index of the first of refs whose skill
// version no longer exists (its skill or the version deleted), -1 when
// every one does: the rule of sessions and of deployments' runs.
func (k *skillAPI) deletedSkill(ctx context.Context, refs []ma.SkillRef) (int, error) {
	for i, ref := range refs {
		if _, err := k.st.GetSkillVersion(ctx, ref.SkillID, ref.Version); errors.Is(err, store.ErrNotFound) {
			return i, nil
		} else if err != nil {
			return -1, err
		}
	}
	return -1, nil
}
