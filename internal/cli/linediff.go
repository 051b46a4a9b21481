package cli

import (
	"fmt"
	"strings"
)

// maxDiffCells bounds the longest-common-subsequence table of a line
// diff (lines of one side times lines of the other, once the common
// head and tail are set aside): 4M cells of 4 bytes. Beyond it the
// differing middle is shown as removed then added whole, which is still a
// correct diff, only not the shortest.
const maxDiffCells = 4 << 20

// diffContext is the number of unchanged lines shown around a change.
const diffContext = 3

// diffOp is one line of an edit script: ' ' kept, '-' removed from a,
// '+' added from b. line keeps its "\n" (the last line may lack it).
type diffOp struct {
	kind byte
	line string
	// ai and bi are the line's index in a and in b before it (the
	// number of lines of each side that come before it).
	ai, bi int
}

// splitLines splits s into lines, each with its "\n"; the last lacks it
// when s does not end with one. "" has no line.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// lineDiff returns an edit script from a to b: the common head and tail
// kept, and between them a longest-common-subsequence diff (see
// maxDiffCells).
func lineDiff(a, b []string) []diffOp {
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	ops := make([]diffOp, 0, len(a)+len(b))
	for i := range head {
		ops = append(ops, diffOp{' ', a[i], i, i})
	}
	ops = append(ops, middleDiff(a[head:len(a)-tail], b[head:len(b)-tail], head, head)...)
	for k := tail; k > 0; k-- {
		ops = append(ops, diffOp{' ', a[len(a)-k], len(a) - k, len(b) - k})
	}
	return ops
}

// middleDiff is the LCS diff of x and y, whose first lines are a's line
// ai and b's line bi.
func middleDiff(x, y []string, ai, bi int) []diffOp {
	n, m := len(x), len(y)
	var ops []diffOp
	if n == 0 || m == 0 || (n+1)*(m+1) > maxDiffCells {
		for i, l := range x {
			ops = append(ops, diffOp{'-', l, ai + i, bi})
		}
		for j, l := range y {
			ops = append(ops, diffOp{'+', l, ai + n, bi + j})
		}
		return ops
	}
	// L[i*(m+1)+j] is the length of the LCS of x[i:] and y[j:].
	w := m + 1
	L := make([]int32, (n+1)*w)
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				L[i*w+j] = L[(i+1)*w+j+1] + 1
			} else {
				L[i*w+j] = max(L[(i+1)*w+j], L[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case x[i] == y[j]:
			ops = append(ops, diffOp{' ', x[i], ai + i, bi + j})
			i++
			j++
		case L[(i+1)*w+j] >= L[i*w+j+1]:
			ops = append(ops, diffOp{'-', x[i], ai + i, bi + j})
			i++
		default:
			ops = append(ops, diffOp{'+', y[j], ai + i, bi + j})
			j++
		}
	}
	for ; i < n; i++ {
		ops = append(ops, diffOp{'-', x[i], ai + i, bi + j})
	}
	for ; j < m; j++ {
		ops = append(ops, diffOp{'+', y[j], ai + i, bi + j})
	}
	return ops
}

// unifiedDiff is the unified diff of a and b (diff -u's format: hunks
// with three lines of context, "\ No newline at end of file" after a last
// line without one), under the headers "--- nameA" and "+++ nameB". Equal
// texts give "".
func unifiedDiff(a, b, nameA, nameB string) string {
	ops := lineDiff(splitLines(a), splitLines(b))
	var out strings.Builder
	for _, h := range hunks(ops) {
		if out.Len() == 0 {
			fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)
		}
		writeHunk(&out, ops[h[0]:h[1]])
	}
	return out.String()
}

// hunks groups the changes of ops into hunks: [start, end) ranges of ops
// with up to diffContext kept lines around each change, two changes
// sharing a hunk when at most 2*diffContext kept lines part them.
func hunks(ops []diffOp) [][2]int {
	var hs [][2]int
	for i := 0; i < len(ops); i++ {
		if ops[i].kind == ' ' {
			continue
		}
		start := max(0, i-diffContext)
		last := i
		for j := i + 1; j < len(ops) && j-last <= 2*diffContext+1; j++ {
			if ops[j].kind != ' ' {
				last = j
			}
		}
		end := min(len(ops), last+diffContext+1)
		hs = append(hs, [2]int{start, end})
		i = last
	}
	return hs
}

// writeHunk writes one hunk: its @@ header and its lines.
func writeHunk(out *strings.Builder, ops []diffOp) {
	var na, nb int
	for _, op := range ops {
		if op.kind != '+' {
			na++
		}
		if op.kind != '-' {
			nb++
		}
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(ops[0].ai, na), hunkRange(ops[0].bi, nb))
	for _, op := range ops {
		out.WriteByte(op.kind)
		out.WriteString(op.line)
		if !strings.HasSuffix(op.line, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange is one side of a hunk header: the first line (1-based) and
// the count, the count left out when 1; an empty side names the line
// before it.
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}
