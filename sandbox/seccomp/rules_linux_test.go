//go:build linux && (amd64 || arm64)

package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestRulesTable(t *testing.T) {
	names := map[string]bool{}
	nrs := map[int]string{}
	for _, r := range rules() {
		if r.name == "" || r.reason == "" {
			t.Errorf("rule %q (nr %d) has no name or no reason", r.name, r.nr)
		}
		if r.errno == 0 {
			t.Errorf("%s: no errno", r.name)
		}
		if names[r.name] {
			t.Errorf("%s: listed twice", r.name)
		}
		names[r.name] = true
		if r.nr == absent {
			continue
		}
		if other, ok := nrs[r.nr]; ok {
			t.Errorf("%s and %s share number %d", r.name, other, r.nr)
		}
		nrs[r.nr] = r.name
	}
}

func TestProgram(t *testing.T) {
	p, err := program()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) > maxInsns {
		t.Fatalf("%d instructions", len(p))
	}
	head := []unix.SockFilter{load(offArch), jeq(auditArch, 1, 0), ret(unix.SECCOMP_RET_KILL_PROCESS), load(offNr)}
	for i, want := range head {
		if p[i] != want {
			t.Errorf("instruction %d = %+v, want %+v", i, p[i], want)
		}
	}
	if last := p[len(p)-1]; last != ret(unix.SECCOMP_RET_ALLOW) {
		t.Errorf("last instruction = %+v, want allow", last)
	}
	checked := map[uint32]bool{}
	for i, ins := range p {
		if ins.Code&0x07 != unix.BPF_JMP {
			continue
		}
		if i+1+int(ins.Jt) >= len(p) || i+1+int(ins.Jf) >= len(p) {
			t.Errorf("instruction %d jumps past the end", i)
		}
		if ins.Code == unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K {
			checked[ins.K] = true
		}
	}
	for _, r := range rules() {
		if r.nr != absent && !checked[uint32(r.nr)] {
			t.Errorf("%s (nr %d) is not checked by the program", r.name, r.nr)
		}
	}
}

func TestArgMatchCompile(t *testing.T) {
	for _, m := range []argMatch{
		{op: anyBit, arg: 6, mask: 1},
		{op: oneOf, arg: 0, mask: allBits},
		{op: matchOp(99), arg: 0},
	} {
		if _, err := m.compile(errnoRet(unix.EPERM)); err == nil {
			t.Errorf("%+v compiled", m)
		}
	}
}
