package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// skillRoutes registers the Skills API.
func (s *Server) skillRoutes() {
	upload := s.cfg.MaxFileSize + multipartSlack
	s.handle("POST /v1/skills", upload, s.createSkill)
	s.handle("GET /v1/skills", smallBody, s.listSkills)
	s.handle("GET /v1/skills/{id}", smallBody, s.getSkill)
	s.handle("DELETE /v1/skills/{id}", smallBody, noBody(s.deleteSkill))
	s.handle("POST /v1/skills/{id}/versions", upload, s.createSkillVersion)
	s.handle("GET /v1/skills/{id}/versions", smallBody, s.listSkillVersions)
	s.handle("GET /v1/skills/{id}/versions/{version}", smallBody, s.getSkillVersion)
	s.handle("DELETE /v1/skills/{id}/versions/{version}", smallBody, noBody(s.deleteSkillVersion))
	s.handle("GET /v1/skills/{id}/versions/{version}/content", smallBody, s.downloadSkillVersion)
}

// newVersion is the stored version of a checked upload and its archive.
func newVersion(skillID string, u *skillUpload, a *skillArchive, now time.Time) store.SkillVersion {
	return store.SkillVersion{SkillVersion: ma.SkillVersion{ID: strconv.FormatInt(now.UnixMicro(), 10), Type: "skill_version",
		SkillID: skillID, Name: u.name, Description: u.description, CreatedAt: ma.Time(now)}, SizeBytes: a.size, SHA256: a.sha256}
}

func (s *Server) createSkill(w http.ResponseWriter, r *http.Request) error {
	u, err := s.readSkillUpload(r, true)
	if err != nil {
		return err
	}
	defer u.close()
	now := time.Now()
	a, err := u.archive(s.cfg.FileSpoolDir, now)
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
	if err := s.cfg.Store.CreateSkill(r.Context(), sk, v, a.f); err != nil {
		return err
	}
	writeJSON(w, sk.Skill)
	return nil
}

// getSkillOr404 reads a skill, answering 404 when there is none.
func (s *Server) getSkillOr404(ctx context.Context, id string) (store.Skill, error) {
	sk, err := s.cfg.Store.GetSkill(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return sk, notFound("skill %s not found", id)
	}
	return sk, err
}

func (s *Server) getSkill(w http.ResponseWriter, r *http.Request) error {
	sk, err := s.getSkillOr404(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, sk.Skill)
	return nil
}

func (s *Server) listSkills(w http.ResponseWriter, r *http.Request) error {
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
		if items, err = s.cfg.Store.ListSkills(r.Context(), lq); err != nil {
			return err
		}
	}
	writePageOf(w, items, lq, "desc", func(sk store.Skill) ma.Skill { return sk.Skill })
	return nil
}

func (s *Server) deleteSkill(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	err := s.cfg.Store.DeleteSkill(r.Context(), id)
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

func (s *Server) createSkillVersion(w http.ResponseWriter, r *http.Request) error {
	sk, err := s.getSkillOr404(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	u, err := s.readSkillUpload(r, false)
	if err != nil {
		return err
	}
	defer u.close()
	if u.name != sk.Name {
		return badRequest("SKILL.md: name %q is not this skill's name %q: every version of a skill has the name of its first", u.name, sk.Name)
	}
	now := time.Now()
	a, err := u.archive(s.cfg.FileSpoolDir, now)
	if err != nil {
		return err
	}
	defer a.close()
	v, _, err := s.cfg.Store.CreateSkillVersion(r.Context(), newVersion(sk.ID, u, a, now), a.f)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("skill %s not found", sk.ID)
	}
	if err != nil {
		return err
	}
	writeJSON(w, v.SkillVersion)
	return nil
}

func (s *Server) listSkillVersions(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := s.getSkillOr404(r.Context(), id); err != nil {
		return err
	}
	lq, err := newestFirst(r)
	if err != nil {
		return err
	}
	items, err := s.cfg.Store.ListSkillVersions(r.Context(), id, lq)
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
func (s *Server) skillVersion(ctx context.Context, field, skillID, version string, latest bool) (store.SkillVersion, error) {
	sk, err := s.getSkillOr404(ctx, skillID)
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
	v, err := s.cfg.Store.GetSkillVersion(ctx, skillID, version)
	if errors.Is(err, store.ErrNotFound) {
		return v, notFound("%sversion %s of skill %s not found", field, version, skillID)
	}
	return v, err
}

func (s *Server) getSkillVersion(w http.ResponseWriter, r *http.Request) error {
	v, err := s.skillVersion(r.Context(), "", r.PathValue("id"), r.PathValue("version"), true)
	if err != nil {
		return err
	}
	writeJSON(w, v.SkillVersion)
	return nil
}

func (s *Server) deleteSkillVersion(w http.ResponseWriter, r *http.Request) error {
	v, err := s.skillVersion(r.Context(), "", r.PathValue("id"), r.PathValue("version"), false)
	if err != nil {
		return err
	}
	err = s.cfg.Store.DeleteSkillVersion(r.Context(), v.SkillID, v.ID)
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
func (s *Server) downloadSkillVersion(w http.ResponseWriter, r *http.Request) error {
	v, err := s.skillVersion(r.Context(), "", r.PathValue("id"), r.PathValue("version"), true)
	if err != nil {
		return err
	}
	read := func(ctx context.Context, n int) ([]byte, error) {
		return s.cfg.Store.ReadSkillChunk(ctx, v.SkillID, v.ID, n)
	}
	return s.streamContent(w, r, stored{what: fmt.Sprintf("skill %s version %s", v.SkillID, v.ID), size: v.SizeBytes, sha256: v.SHA256, read: read},
		"application/zip", v.Name+".zip")
}

// checkSkills checks that the skill versions an agent pins still exist.
func (s *Server) checkSkills(ctx context.Context, field string, refs []ma.SkillRef) error {
	for i, ref := range refs {
		if _, err := s.cfg.Store.GetSkillVersion(ctx, ref.SkillID, ref.Version); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return badRequest("%s[%d]: version %s of skill %s was deleted: update the agent's skills", field, i, ref.Version, ref.SkillID)
			}
			return err
		}
	}
	return nil
}
