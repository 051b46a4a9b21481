package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

func runSkills(t *testing.T, open func(t *testing.T) store.Store) {
	for _, tt := range []struct {
		name string
		fn   func(*testing.T, store.Skills)
	}{
		{"Versions", testSkillVersions},
		{"ListPaging", testSkillList},
		{"SizeMismatch", testSkillSizeMismatch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			tt.fn(t, s)
		})
	}
}

func newSkillVersion(skillID, version string, content []byte) store.SkillVersion {
	sum := sha256.Sum256(content)
	return store.SkillVersion{SkillVersion: ma.SkillVersion{ID: version, Type: "skill_version", SkillID: skillID, Name: "pdf",
		Description: "Reads PDFs.", CreatedAt: now()}, SizeBytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
}

func newSkill(t *testing.T, s store.Skills, version string, content []byte) store.Skill {
	t.Helper()
	sk := store.Skill{Skill: ma.Skill{ID: ids.New(ids.Skill), Type: "skill", DisplayName: "PDF", LatestVersionID: version,
		Source: ma.SkillSource{Type: "custom"}, CreatedAt: now(), UpdatedAt: now()}, Name: "pdf"}
	if err := s.CreateSkill(context.Background(), sk, newSkillVersion(sk.ID, version, content), bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	return sk
}

// readSkill reads a version's content back piece by piece.
func readSkill(t *testing.T, s store.Skills, skillID, version string) []byte {
	t.Helper()
	var out []byte
	for n := 0; ; n++ {
		b, err := s.ReadSkillChunk(context.Background(), skillID, version, n)
		if errors.Is(err, store.ErrNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
}

func testSkillVersions(t *testing.T, s store.Skills) {
	ctx := context.Background()
	first := bytes.Repeat([]byte("PK"), store.FileChunk) // two pieces
	sk := newSkill(t, s, "1000", first)
	got, err := s.GetSkill(ctx, sk.ID)
	if err != nil || got.Name != "pdf" || got.LatestVersionID != "1000" || got.DisplayName != "PDF" {
		t.Fatalf("GetSkill = %+v, %v", got, err)
	}
	if back := readSkill(t, s, sk.ID, "1000"); !bytes.Equal(back, first) {
		t.Fatalf("content read back: %d bytes, want %d", len(back), len(first))
	}
	// A proposed id not above the newest one is moved past it.
	v, sk2, err := s.CreateSkillVersion(ctx, newSkillVersion(sk.ID, "999", []byte("second")), bytes.NewReader([]byte("second")))
	if err != nil || v.ID != "1001" || sk2.LatestVersionID != "1001" {
		t.Fatalf("CreateSkillVersion = %s, latest %s, %v; want 1001", v.ID, sk2.LatestVersionID, err)
	}
	v3, _, err := s.CreateSkillVersion(ctx, newSkillVersion(sk.ID, "5000", []byte("third")), bytes.NewReader([]byte("third")))
	if err != nil || v3.ID != "5000" {
		t.Fatalf("third version = %s, %v", v3.ID, err)
	}
	if _, _, err := s.CreateSkillVersion(ctx, newSkillVersion("skill_nope", "1", nil), bytes.NewReader(nil)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("version of a missing skill: %v", err)
	}
	gv, err := s.GetSkillVersion(ctx, sk.ID, "1001")
	if err != nil || gv.Description != "Reads PDFs." || gv.SizeBytes != 6 || gv.SHA256 == "" {
		t.Fatalf("GetSkillVersion = %+v, %v", gv, err)
	}
	for _, bad := range []string{"latest", "7", "-1"} {
		if _, err := s.GetSkillVersion(ctx, sk.ID, bad); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetSkillVersion(%q): %v", bad, err)
		}
	}
	items, err := s.ListSkillVersions(ctx, sk.ID, store.ListQuery{Limit: 2, Desc: true})
	if err != nil || len(items) != 2 || items[0].Value.ID != "5000" || items[1].Pos != 1001 {
		t.Fatalf("versions page 1: %+v, %v", items, err)
	}
	items, err = s.ListSkillVersions(ctx, sk.ID, store.ListQuery{Limit: 2, Desc: true, After: items[1].Pos})
	if err != nil || len(items) != 1 || items[0].Value.ID != "1000" {
		t.Fatalf("versions page 2: %+v, %v", items, err)
	}
	if err := s.DeleteSkill(ctx, sk.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete a skill with versions: %v", err)
	}
	// Deleting the newest makes the next newest the latest.
	for _, del := range []struct{ version, latest string }{{"5000", "1001"}, {"1000", "1001"}, {"1001", ""}} {
		if err := s.DeleteSkillVersion(ctx, sk.ID, del.version); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetSkill(ctx, sk.ID); err != nil || got.LatestVersionID != del.latest {
			t.Fatalf("after deleting %s: latest %q, %v; want %q", del.version, got.LatestVersionID, err, del.latest)
		}
		if _, err := s.ReadSkillChunk(ctx, sk.ID, del.version, 0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("content of deleted version %s: %v", del.version, err)
		}
	}
	if err := s.DeleteSkillVersion(ctx, sk.ID, "1001"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete a version twice: %v", err)
	}
	if err := s.DeleteSkill(ctx, sk.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSkill(ctx, sk.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetSkill after delete: %v", err)
	}
	if err := s.DeleteSkill(ctx, sk.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

func testSkillList(t *testing.T, s store.Skills) {
	ctx := context.Background()
	var all []string
	for i := range 5 {
		all = append(all, newSkill(t, s, strconv.Itoa(i+1), []byte("x")).ID)
	}
	page1, err := s.ListSkills(ctx, store.ListQuery{Limit: 3, Desc: true})
	if err != nil || len(page1) != 3 || page1[0].Value.ID != all[4] || page1[0].Value.Name != "pdf" {
		t.Fatalf("first page: %+v, %v", page1, err)
	}
	page2, err := s.ListSkills(ctx, store.ListQuery{Limit: 3, Desc: true, After: page1[2].Pos})
	if err != nil || len(page2) != 2 || page2[1].Value.ID != all[0] {
		t.Fatalf("second page: %+v, %v", page2, err)
	}
}

func testSkillSizeMismatch(t *testing.T, s store.Skills) {
	ctx := context.Background()
	sk := store.Skill{Skill: ma.Skill{ID: ids.New(ids.Skill), Type: "skill", LatestVersionID: "1", CreatedAt: now(), UpdatedAt: now()}, Name: "pdf"}
	v := newSkillVersion(sk.ID, "1", []byte("short"))
	if err := s.CreateSkill(ctx, sk, v, bytes.NewReader([]byte("longer than that"))); err == nil {
		t.Fatal("content longer than its size was stored")
	}
	if _, err := s.GetSkill(ctx, sk.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused skill is there: %v", err)
	}
	if _, err := s.ReadSkillChunk(ctx, sk.ID, "1", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused skill's content is there: %v", err)
	}
}
