package toolhost

import (
	"archive/zip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"io"
	"path"
	"path/filepath"
	"strings"

	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox"
)

// skillsDir is where a session's skills are placed, relative to its
// workspace: skills/<name>/, as the official environment worker places
// them in its work directory.
const skillsDir = "skills"

// skillPrompts describes the skills of a session's agent for the system
// prompt (harness.SkillPrompter).
type skillPrompts struct {
	st interface {
		environmentGetter
		skillReader
	}
	// sandboxed: cloud sessions see their workspace at
	// sandbox.WorkspaceDir, so their skills get absolute paths.
	sandboxed bool
}

// SkillsPrompt implements harness.SkillPrompter: for each skill its name,
// its description and the path of its SKILL.md, which the model reads
// with the read tool when a task calls for the skill. A skill version
// deleted since the session was created is left out (and not placed).
func (p skillPrompts) SkillsPrompt(ctx context.Context, sess *ma.Session) (string, error) {
	dir := skillsDir
	where := "relative to your workspace directory (where bash starts)"
	if p.sandboxed {
		env, err := p.st.GetEnvironment(ctx, sess.EnvironmentID)
		if err != nil {
			return "", err
		}
		if env.Config.Type == ma.EnvCloud {
			dir, where = sandbox.WorkspaceDir+"/"+skillsDir, "in your workspace"
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<skills>\nYou have these skills: folders of instructions, and sometimes scripts and resources, %s. "+
		"When a task matches a skill's description, first read the skill's SKILL.md with the read tool and follow it; "+
		"read or run the skill's other files only as its SKILL.md says. Do not read a skill that the task does not need. "+
		"Skill files are read-only.\n", where)
	n := 0
	for _, ref := range sess.Agent.Skills {
		v, err := p.st.GetSkillVersion(ctx, ref.SkillID, ref.Version)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", err
		}
		n++
		fmt.Fprintf(&b, "<skill>\n<name>%s</name>\n<description>%s</description>\n<location>%s</location>\n</skill>\n",
			html.EscapeString(v.Name), html.EscapeString(v.Description), path.Join(dir, v.Name, "SKILL.md"))
	}
	if n == 0 {
		return "", nil
	}
	b.WriteString("</skills>")
	return b.String(), nil
}

// SkillPrompts returns the harness's SkillPrompter: it describes the
// skills of a session's agent where the host places them.
func (t *Host) SkillPrompts() harness.SkillPrompter {
	return skillPrompts{st: t.st, sandboxed: t.sandboxes != nil}
}

// skillKey names a placed skill among a session's placed resources.
func skillKey(ref ma.SkillRef) string { return "skill:" + ref.SkillID + "@" + ref.Version }

// placeSkill writes a skill version's files under skills/<name>/ in the
// session's workspace, read-only, with the session's bash: to a temporary
// directory beside it, then renamed. It returns the directory.
func (t *Host) placeSkill(ctx context.Context, sess *ma.Session, ref ma.SkillRef) (string, error) {
	v, err := t.st.GetSkillVersion(ctx, ref.SkillID, ref.Version)
	if err != nil {
		return "", err
	}
	zr, err := zip.NewReader(&chunkReader{ctx: ctx, st: t.st, v: v}, v.SizeBytes)
	if err != nil {
		return "", fmt.Errorf("skill %s version %s: %w", v.SkillID, v.ID, err)
	}
	rel := path.Join(skillsDir, v.Name)
	dst, tmp := shellQuote(rel), shellQuote(rel+".reins-part")
	b := &placer{t: t, ctx: ctx, sess: sess}
	b.add(fmt.Sprintf("rm -rf -- %s && mkdir -p -- %s", tmp, tmp), 0) // the queue is empty: no flush, no error
	for _, f := range zr.File {
		name, ok := strings.CutPrefix(f.Name, v.Name+"/")
		if !ok || !filepath.IsLocal(name) || strings.HasSuffix(f.Name, "/") {
			continue // not in the skill's directory: never written
		}
		if err := b.file(path.Join(rel+".reins-part", name), f); err != nil {
			return "", fmt.Errorf("skill %s version %s: %s: %w", v.SkillID, v.ID, f.Name, err)
		}
	}
	if err := b.add(fmt.Sprintf("find %s -type f -exec chmod 0444 {} + && rm -rf -- %s && mv -- %s %s", tmp, dst, tmp, dst), 0); err != nil {
		return "", err
	}
	return rel, b.flush()
}

// placer batches placing commands, so that a skill of many small files
// takes few bash calls.
type placer struct {
	t       *Host
	ctx     context.Context
	sess    *ma.Session
	cmds    []string
	payload int
}

// add queues a command carrying n bytes of content, running the queue
// first when it is full.
func (p *placer) add(cmd string, n int) error {
	if p.payload+n > resourcePiece && len(p.cmds) > 0 {
		if err := p.flush(); err != nil {
			return err
		}
	}
	p.cmds = append(p.cmds, cmd)
	p.payload += n
	return nil
}

// flush runs the queued commands as one script, which stops at the first
// that fails (a here-document must end its line, so no && chain).
func (p *placer) flush() error {
	if len(p.cmds) == 0 {
		return nil
	}
	cmd := "set -e\n" + strings.Join(p.cmds, "\n")
	p.cmds, p.payload = nil, 0
	return p.t.bash(p.ctx, p.sess, cmd)
}

// file queues the writing of a zip entry at rel, piece by piece.
func (p *placer) file(rel string, f *zip.File) error {
	r, err := f.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	dst := shellQuote(rel)
	if err := p.add(fmt.Sprintf("mkdir -p -- \"$(dirname -- %s)\" && : > %s", dst, dst), 0); err != nil {
		return err
	}
	buf := make([]byte, resourcePiece/2)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			enc := base64.StdEncoding.EncodeToString(buf[:n])
			if err := p.add(fmt.Sprintf("base64 -d >> %s <<'REINS_EOF'\n%s\nREINS_EOF\n", dst, enc), n); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// chunkReader reads a skill version's stored content at any offset (an
// io.ReaderAt for archive/zip), keeping the last piece read.
type chunkReader struct {
	ctx  context.Context
	st   skillReader
	v    store.SkillVersion
	n    int
	last []byte
}

func (c *chunkReader) ReadAt(p []byte, off int64) (int, error) {
	read := 0
	for read < len(p) {
		at := off + int64(read)
		if at >= c.v.SizeBytes {
			return read, io.EOF
		}
		n := int(at / store.FileChunk)
		if c.last == nil || c.n != n {
			chunk, err := c.st.ReadSkillChunk(c.ctx, c.v.SkillID, c.v.ID, n)
			if err != nil {
				return read, err
			}
			c.n, c.last = n, chunk
		}
		k := copy(p[read:], c.last[at-int64(n)*store.FileChunk:])
		if k == 0 {
			return read, io.ErrUnexpectedEOF
		}
		read += k
	}
	return read, nil
}
