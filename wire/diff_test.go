package wire

// Readable differences between two goldens: a line diff per section (LCS),
// where a removed and an added line with the same HEAD are shown as one
// changed line with the key paths that differ.

import (
	"fmt"
	"sort"
	"strings"
)

// diffGoldens describes how got differs from want ("" if not at all).
func diffGoldens(want, got *golden) string {
	var b strings.Builder
	names := []string{}
	seen := map[string]bool{}
	for _, g := range []*golden{want, got} {
		for _, s := range g.Sections {
			if !seen[s.Name] {
				seen[s.Name] = true
				names = append(names, s.Name)
			}
		}
	}
	for _, n := range names {
		var w, g []line
		if s := want.section(n); s != nil {
			w = s.Lines
		}
		if s := got.section(n); s != nil {
			g = s.Lines
		}
		if d := diffLines(w, g); d != "" {
			fmt.Fprintf(&b, "== %s  (- reference only, + ours only, ~ changed shape, context by HEAD)\n%s", n, d)
		}
	}
	return b.String()
}

func diffLines(want, got []line) string {
	ws, gs := make([]string, len(want)), make([]string, len(got))
	for i, l := range want {
		ws[i] = l.String()
	}
	for i, l := range got {
		gs[i] = l.String()
	}
	// LCS table.
	n, m := len(ws), len(gs)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if ws[i] == gs[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		kind byte // '=', '-', '+'
		w, g int
	}
	var ops []op
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && ws[i] == gs[j]:
			ops = append(ops, op{'=', i, j})
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			ops = append(ops, op{'+', -1, j})
			j++
		default:
			ops = append(ops, op{'-', i, -1})
			i++
		}
	}
	changed := false
	for _, o := range ops {
		if o.kind != '=' {
			changed = true
		}
	}
	if !changed {
		return ""
	}
	var b strings.Builder
	const ctx = 2
	near := func(k int) bool {
		for d := -ctx; d <= ctx; d++ {
			if k+d >= 0 && k+d < len(ops) && ops[k+d].kind != '=' {
				return true
			}
		}
		return false
	}
	skipped := false
	for k := 0; k < len(ops); {
		o := ops[k]
		if o.kind == '=' {
			if near(k) {
				if skipped {
					b.WriteString("   ...\n")
					skipped = false
				}
				fmt.Fprintf(&b, "   %s\n", want[o.w].Head)
			} else {
				skipped = true
			}
			k++
			continue
		}
		// A run of changes: pair removed and added lines with the same head.
		var dels, adds []int
		for ; k < len(ops) && ops[k].kind != '='; k++ {
			if ops[k].kind == '-' {
				dels = append(dels, ops[k].w)
			} else {
				adds = append(adds, ops[k].g)
			}
		}
		if skipped {
			b.WriteString("   ...\n")
			skipped = false
		}
		usedAdd := map[int]bool{}
		pair := map[int]int{}
		next := 0
		for _, d := range dels {
			for a := next; a < len(adds); a++ {
				if got[adds[a]].Head == want[d].Head {
					pair[d], usedAdd[a], next = adds[a], true, a+1
					break
				}
			}
		}
		ai := 0
		flushAdds := func(upto int) { // adds before index upto of the add list
			for ; ai < upto; ai++ {
				if !usedAdd[ai] {
					fmt.Fprintf(&b, " + %s\n", got[adds[ai]])
				}
			}
		}
		for _, d := range dels {
			g, ok := pair[d]
			if !ok {
				fmt.Fprintf(&b, " - %s\n", want[d])
				continue
			}
			for a := range adds {
				if adds[a] == g {
					flushAdds(a)
					ai = a + 1
				}
			}
			fmt.Fprintf(&b, " ~ %s: %s\n", want[d].Head, shapeDiff(want[d], got[g]))
		}
		flushAdds(len(adds))
	}
	return b.String()
}

// shapeDiff lists the key paths whose kinds differ between two lines.
func shapeDiff(want, got line) string {
	wf, gf := map[string]string{}, map[string]string{}
	flatten(want, wf)
	flatten(got, gf)
	var parts []string
	for _, k := range sortedKeys(wf) {
		if gv, ok := gf[k]; ok && gv != wf[k] {
			parts = append(parts, fmt.Sprintf("%s: reference %s, ours %s", k, wf[k], gv))
		}
	}
	for _, p := range onlyIn(wf, gf) {
		parts = append(parts, "only reference has "+p)
	}
	for _, p := range onlyIn(gf, wf) {
		parts = append(parts, "only ours has "+p)
	}
	return strings.Join(parts, "; ")
}

// onlyIn lists the paths of a missing from b, a whole missing subtree as
// its root (with its leaves when small).
func onlyIn(a, b map[string]string) []string {
	under := func(m map[string]string, p string) bool {
		for k := range m {
			if k == p || strings.HasPrefix(k, p+".") || strings.HasPrefix(k, p+"[") {
				return true
			}
		}
		return false
	}
	roots := map[string]bool{}
	for k := range a {
		if _, ok := b[k]; ok {
			continue
		}
		root := k
		for _, p := range ancestors(k) {
			if !under(b, p) {
				root = p
				break
			}
		}
		roots[root] = true
	}
	var out []string
	for _, r := range sortedKeys(roots) {
		if v, ok := a[r]; ok {
			out = append(out, r+"="+v)
			continue
		}
		var leaves []string
		for _, k := range sortedKeys(a) {
			if strings.HasPrefix(k, r+".") || strings.HasPrefix(k, r+"[") {
				leaves = append(leaves, strings.TrimPrefix(k, r)+"="+a[k])
			}
		}
		if len(leaves) > 6 {
			leaves = append(leaves[:6], fmt.Sprintf("… %d more", len(leaves)-6))
		}
		out = append(out, r+" {"+strings.Join(leaves, " ")+"}")
	}
	sort.Strings(out)
	return out
}

// ancestors of a flattened path, shortest first, ending with the path.
func ancestors(k string) []string {
	var out []string
	for i := 1; i < len(k); i++ {
		if k[i] == '.' || k[i] == '[' {
			out = append(out, k[:i])
		}
	}
	return append(out, k)
}

func flatten(l line, out map[string]string) {
	switch {
	case l.NoBody:
		out["."] = "(no body)"
		return
	case l.Raw != "":
		out["."] = l.Raw
		return
	}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 {
				out[p] = "{}"
			}
			for k, vv := range x {
				walk(p+"."+k, vv)
			}
		case []any:
			if len(x) == 0 {
				out[p] = "[]"
			}
			for i, vv := range x {
				walk(fmt.Sprintf("%s[%d]", p, i), vv)
			}
		case nil:
			out[p] = "null"
		default:
			out[p] = fmt.Sprint(x)
		}
	}
	walk("", l.Shape)
}
