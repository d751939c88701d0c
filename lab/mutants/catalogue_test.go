package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, seen from this package's directory.
const root = "../.."

// TestCatalogue_SnippetsOccurOnce: every site's snippet occurs exactly once
// in its file, so the catalogue cannot drift from the code unnoticed.
func TestCatalogue_SnippetsOccurOnce(t *testing.T) {
	for _, m := range catalogue {
		files, err := m.apply(root)
		if err != nil {
			t.Error(err)
			continue
		}
		for path, src := range files {
			if orig, err := os.ReadFile(path); err == nil && string(orig) == src {
				t.Errorf("mutant %s changes nothing in %s", m.ID, path)
			}
		}
	}
}

// TestCatalogue_EntriesAreComplete: ids are unique, every entry says what it
// breaks, where its tests are and how long they may take, and its -run
// pattern selects the tests it names.
func TestCatalogue_EntriesAreComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range catalogue {
		if m.ID == "" || seen[m.ID] {
			t.Errorf("mutant id %q is empty or used twice", m.ID)
		}
		seen[m.ID] = true
		if m.Rule == "" || len(m.Sites) == 0 || len(m.Pkgs) == 0 || m.Run == "" || len(m.Tests) == 0 || m.Bound <= 0 {
			t.Errorf("mutant %s: an entry needs a rule, sites, packages, a -run pattern, its tests and a bound: %+v", m.ID, m)
			continue
		}
		re, err := regexp.Compile(m.Run)
		if err != nil {
			t.Errorf("mutant %s: -run %q: %v", m.ID, m.Run, err)
			continue
		}
		for _, name := range m.Tests {
			if !re.MatchString(name) {
				t.Errorf("mutant %s: -run %q does not select %s", m.ID, m.Run, name)
			}
		}
	}
}

var (
	tableRow = regexp.MustCompile(`^\| ([A-Z]+) \|.*\| ([^|]*) \| (ci)? ?\|$`)
	testName = regexp.MustCompile("`(Test[A-Za-z0-9_/]*)`")
)

// TestCatalogue_MatchesTheProtocolTable: the table of mutants in
// s3lock/PROTOCOL.md lists the catalogue's mutants, in its order, with the
// tests that kill them and whether CI runs them.
func TestCatalogue_MatchesTheProtocolTable(t *testing.T) {
	f, err := os.Open(filepath.Join(root, "s3lock", "PROTOCOL.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type row struct {
		id    string
		tests []string
		ci    bool
	}
	var rows []row
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "**Mutants of the Go code.**"):
			in = true
		case in && strings.HasPrefix(line, "## "):
			in = false
		case in:
			if m := tableRow.FindStringSubmatch(line); m != nil {
				r := row{id: m[1], ci: m[3] == "ci"}
				for _, n := range testName.FindAllStringSubmatch(m[2], -1) {
					r.tests = append(r.tests, n[1])
				}
				rows = append(rows, r)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(catalogue) {
		t.Errorf("PROTOCOL.md's table of mutants has %d rows; the catalogue %d mutants", len(rows), len(catalogue))
	}
	for i := range min(len(rows), len(catalogue)) {
		r, m := rows[i], catalogue[i]
		switch {
		case r.id != m.ID:
			t.Errorf("row %d of PROTOCOL.md's table is mutant %s; the catalogue's mutant %d is %s", i+1, r.id, i+1, m.ID)
		case !slices.Equal(r.tests, m.Tests):
			t.Errorf("mutant %s: PROTOCOL.md names %v; the catalogue %v", m.ID, r.tests, m.Tests)
		case r.ci != m.CI:
			t.Errorf("mutant %s: PROTOCOL.md says ci=%v; the catalogue %v", m.ID, r.ci, m.CI)
		}
	}
}

// TestParse reads what killed a mutant from go test -v output.
func TestParse(t *testing.T) {
	out := []byte(`=== RUN   TestA
=== RUN   TestA/sub
    a_test.go:9: boom
--- FAIL: TestA (0.10s)
    --- FAIL: TestA/sub (0.00s)
=== RUN   TestB
--- FAIL: TestB (0.10s)
FAIL
`)
	o := parse(out)
	if o.ran != 3 || !slices.Equal(o.failed, []string{"TestA", "TestA/sub", "TestB"}) || o.timeout != "" {
		t.Errorf("parse = %+v; want 3 run, TestA, TestA/sub and TestB failed", o)
	}
	o = parse([]byte("=== RUN   TestC\npanic: test timed out after 1m0s\n\trunning tests:\n\t\tTestC (1m0s)\n"))
	if o.timeout != "after 1m0s in TestC" {
		t.Errorf("timeout = %q; want after 1m0s in TestC", o.timeout)
	}
}

// TestSelectMutants picks by id and by the CI mark, and refuses unknown ids.
func TestSelectMutants(t *testing.T) {
	cat := []mutant{{ID: "A"}, {ID: "B", CI: true}, {ID: "C", CI: true}}
	ids := func(ms []mutant) (out []string) {
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	for _, tc := range []struct {
		only string
		ci   bool
		want []string
	}{
		{"", false, []string{"A", "B", "C"}},
		{"A,C", false, []string{"A", "C"}},
		{" C ", false, []string{"C"}},
		{"", true, []string{"B", "C"}},
		{"A,B", true, []string{"B"}},
	} {
		got, err := selectMutants(cat, tc.only, tc.ci)
		if err != nil || !slices.Equal(ids(got), tc.want) {
			t.Errorf("selectMutants(%q, ci=%v) = %v, %v; want %v", tc.only, tc.ci, ids(got), err, tc.want)
		}
	}
	if _, err := selectMutants(cat, "Z", false); err == nil {
		t.Error("selectMutants of an unknown id: no error")
	}
}
