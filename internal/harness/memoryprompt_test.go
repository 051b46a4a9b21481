package harness

import (
	"encoding/json"
	"strings"
	"testing"

	ma "github.com/reinsdev/reins/managedagents"
)

func TestMemoryPrompt(t *testing.T) {
	instr := "Write one file per topic."
	raw := func(r ma.SessionResource) ma.Raw {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sess := &ma.Session{ID: "sesn_1", Resources: []ma.Raw{
		raw(ma.SessionResource{ID: "sesrsc_1", Type: "file", FileID: "file_1", MountPath: "/workspace/a"}),
		raw(ma.SessionResource{Type: "memory_store", MemoryStoreID: "memstore_1", Access: "read_only", Name: "Team Notes",
			Description: "what the team agreed", Instructions: &instr, MountPath: "/mnt/memory/team-notes"}),
	}}
	got := memoryPrompt(sess)
	for _, want := range []string{"<name>Team Notes</name>", "<mount_path>/mnt/memory/team-notes</mount_path>", "<access>read_only</access>",
		"<description>what the team agreed</description>", "<instructions>Write one file per topic.</instructions>"} {
		if !strings.Contains(got, want) {
			t.Errorf("memory prompt lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "file_1") {
		t.Errorf("memory prompt names a file resource:\n%s", got)
	}
	if p := memoryPrompt(&ma.Session{Resources: sess.Resources[:1]}); p != "" {
		t.Errorf("prompt without memory stores = %q", p)
	}
}
