// Command mutants proves that the Go tests of the protocol code fail when a
// rule of s3lock/PROTOCOL.md is broken. Each mutant of its catalogue
// (catalogue.go) edits the code at the sites that implement one rule; the
// edit is applied to a scratch copy through go's -overlay (the working tree
// is never touched, and the build cache stays warm), and the named tests
// must fail within the mutant's time bound. A mutant that survives, one that
// does not compile, a snippet that no longer occurs exactly once, or named
// tests that fail on the code as it is, fail the run.
//
//	go -C lab run ./mutants               # the whole catalogue (make mutants)
//	go -C lab run ./mutants -ci           # the part CI runs (make mutants-ci)
//	go -C lab run ./mutants -only C,D     # these mutants
//	go -C lab run ./mutants -list         # the catalogue
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	only := flag.String("only", "", "comma-separated ids of the mutants to run (default: all)")
	ci := flag.Bool("ci", false, "run only the mutants marked for CI (make mutants-ci)")
	list := flag.Bool("list", false, "list the catalogue and exit")
	verbose := flag.Bool("v", false, "print the test output of every run, not only of failures")
	flag.Parse()
	selected, err := selectMutants(catalogue, *only, *ci)
	if err != nil {
		fail(err)
	}
	if *list {
		printCatalogue(os.Stdout, selected)
		return
	}
	root, err := repoRoot()
	if err != nil {
		fail(err)
	}
	r := &runner{root: root, verbose: *verbose}
	if !r.run(selected) {
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mutants:", err)
	os.Exit(2)
}

// selectMutants returns the mutants of cat named in only (comma-separated
// ids; all when empty), keeping only those marked for CI when ci is set.
func selectMutants(cat []mutant, only string, ci bool) ([]mutant, error) {
	want := map[string]bool{}
	for _, id := range strings.Split(only, ",") {
		if id = strings.TrimSpace(id); id != "" {
			want[id] = true
		}
	}
	known := map[string]bool{}
	var out []mutant
	for _, m := range cat {
		known[m.ID] = true
		if (len(want) == 0 || want[m.ID]) && (!ci || m.CI) {
			out = append(out, m)
		}
	}
	for id := range want {
		if !known[id] {
			return nil, fmt.Errorf("no mutant %q in the catalogue (make mutants MUTANTSARGS=-list)", id)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no mutant selected")
	}
	return out, nil
}

func printCatalogue(w *os.File, ms []mutant) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "id\tci\tbound\tfiles\tpackages\t-run\trule")
	for _, m := range ms {
		files := map[string]bool{}
		var names []string
		for _, s := range m.Sites {
			if !files[s.File] {
				files[s.File] = true
				names = append(names, s.File)
			}
		}
		ci := ""
		if m.CI {
			ci = "ci"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, ci, m.Bound, strings.Join(names, ","),
			strings.Join(m.Pkgs, ","), m.Run, m.Rule)
	}
	_ = tw.Flush()
}

// repoRoot returns the repository's root, the main module's directory (the
// mutants edit s3lock/ and run its tests there): the nearest directory at or
// above the working directory with a go.mod and an s3lock/ package, so that
// make (in the root) and go -C lab run (in lab/) both find it.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		_, mod := os.Stat(filepath.Join(dir, "go.mod"))
		_, sdk := os.Stat(filepath.Join(dir, "s3lock", "PROTOCOL.md"))
		if mod == nil && sdk == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run it inside the s3lock repository (no go.mod beside s3lock/ above the working directory)")
		}
		dir = parent
	}
}

// runner runs mutants in the module at root.
type runner struct {
	root    string
	verbose bool
}

// run checks the catalogue's snippets, runs the baseline and then every
// mutant, and reports; it returns whether everything passed.
func (r *runner) run(ms []mutant) bool {
	start := time.Now()
	for _, m := range ms {
		if _, err := m.apply(r.root); err != nil {
			fmt.Printf("mutants: the catalogue does not match the code: %v\n", err)
			return false
		}
	}
	if !r.baseline(ms) {
		return false
	}
	var bad []string
	for b := range r.buildAll(ms) {
		m := b.m
		res := r.testMutant(b)
		fmt.Println(res.line(m))
		if res.status != killed {
			bad = append(bad, m.ID)
			if res.status == survived {
				fmt.Printf("    mutant %s survived: go test -run '%s' %s passed with it (%s)\n",
					m.ID, m.Run, strings.Join(m.Pkgs, " "), m.Rule)
			}
		}
	}
	fmt.Printf("mutants: %d run, %d not killed%s, in %s\n", len(ms), len(bad), listed(bad),
		time.Since(start).Round(time.Second))
	return len(bad) == 0
}

func listed(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return " (" + strings.Join(ids, ", ") + ")"
}
