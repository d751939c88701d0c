package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// hangGrace is how long a test binary may run past its own -test.timeout
// (which makes it panic and print the tests still running) before it is
// killed.
const hangGrace = 30 * time.Second

type status int

const (
	killed status = iota
	survived
	broken // does not compile, its tests select nothing, or its binary failed with no failing test
)

// result is what became of one mutant.
type result struct {
	status     status
	by         string // the failing tests, or the timeout that killed it
	build, run time.Duration
}

func (res result) line(m mutant) string {
	what := map[status]string{killed: "killed", survived: "SURVIVED", broken: "BROKEN"}[res.status]
	return fmt.Sprintf("%-2s %-8s %-62s build %5.1fs  run %5.1fs", m.ID, what, res.by,
		res.build.Seconds(), res.run.Seconds())
}

// outcome is one run of a test binary.
type outcome struct {
	failed  []string // the tests that printed --- FAIL (a parent before its subtests)
	ran     int      // how many tests and subtests started
	timeout string   // "after 1m0s in TestX" when the binary's timeout fired
	hung    bool     // the binary outlived its timeout and was killed
	err     error    // nil when the binary passed
	output  []byte
}

// killedBy says what killed the mutant, or "" if the run passed.
func (o outcome) killedBy() string {
	switch {
	case o.err == nil:
		return ""
	case o.hung:
		return "timeout (hung, killed)"
	case o.timeout != "":
		return "timeout " + o.timeout
	case len(o.failed) > 0:
		by := o.failed[0]
		if n := len(o.failed) - 1; n > 0 {
			by += fmt.Sprintf(" (+%d)", n)
		}
		return by
	}
	return fmt.Sprintf("the test binary (%v, no test failed: see its output)", o.err)
}

// baseline runs every selected mutant's tests on the code as it is, one run
// per package; they must pass, or a kill would mean nothing.
func (r *runner) baseline(ms []mutant) bool {
	start := time.Now()
	dir, err := os.MkdirTemp("", "s3lock-mutants-baseline-")
	if err != nil {
		fmt.Println("mutants:", err)
		return false
	}
	defer os.RemoveAll(dir)
	runs := map[string][]string{}
	var pkgs []string
	for _, m := range ms {
		for _, pkg := range m.Pkgs {
			if _, ok := runs[pkg]; !ok {
				pkgs = append(pkgs, pkg)
			}
			runs[pkg] = appendNew(runs[pkg], m.Run)
		}
	}
	ok := true
	for i, pkg := range pkgs {
		bin := filepath.Join(dir, fmt.Sprintf("%d.test", i))
		if out, err := r.build(bin, "", pkg); err != nil {
			fmt.Printf("mutants: baseline: %s does not build: %v\n%s\n", pkg, err, out)
			return false
		}
		bound := time.Duration(0)
		for _, m := range ms {
			bound += m.Bound
		}
		// go test -run splits a pattern at slashes into one per level of
		// subtests: patterns that name subtests cannot be joined with |.
		var joined, apart []string
		for _, run := range runs[pkg] {
			if strings.Contains(run, "/") {
				apart = append(apart, run)
			} else {
				joined = append(joined, "(?:"+run+")")
			}
		}
		if len(joined) > 0 {
			apart = append([]string{strings.Join(joined, "|")}, apart...)
		}
		for _, run := range apart {
			o := r.test(bin, pkg, run, bound, dir)
			switch {
			case o.err != nil:
				fmt.Printf("mutants: baseline FAILED: go test -run '%s' %s fails on the code as it is (%s); "+
					"a mutant's kill would mean nothing:\n%s\n", run, pkg, o.killedBy(), tail(o.output))
				ok = false
			case r.verbose:
				fmt.Printf("%s\n", o.output)
			}
		}
	}
	if ok {
		fmt.Printf("mutants: baseline: the named tests pass on the code as it is (%s)\n", time.Since(start).Round(time.Second))
	}
	return ok
}

// built is a mutant whose test binaries were built (or failed to build).
type built struct {
	m     mutant
	dir   string   // the scratch directory: mutated files, overlay, binaries
	bins  []string // one test binary per package of m
	took  time.Duration
	fault string // why it could not be built: then the mutant is broken
}

// buildAll builds the mutants' test binaries in order, one mutant ahead of
// the tests that run them (builds compute, tests mostly wait), and closes
// the channel after the last.
func (r *runner) buildAll(ms []mutant) <-chan built {
	ch := make(chan built, 1)
	go func() {
		defer close(ch)
		for _, m := range ms {
			ch <- r.buildMutant(m)
		}
	}()
	return ch
}

// buildMutant writes m's edits to a scratch directory and builds its
// packages' test binaries with them (go test -c -overlay): a mutant that
// does not compile is a catalogue error, not a kill.
func (r *runner) buildMutant(m mutant) (b built) {
	b.m = m
	dir, err := os.MkdirTemp("", "s3lock-mutant-"+m.ID+"-")
	if err != nil {
		b.fault = err.Error()
		return b
	}
	b.dir = dir
	files, err := m.apply(r.root)
	if err != nil {
		b.fault = err.Error()
		return b
	}
	overlay, err := writeOverlay(dir, files)
	if err != nil {
		b.fault = err.Error()
		return b
	}
	start := time.Now()
	defer func() { b.took = time.Since(start) }()
	for i, pkg := range m.Pkgs {
		bin := filepath.Join(dir, fmt.Sprintf("%d.test", i))
		if out, err := r.build(bin, overlay, pkg); err != nil {
			b.fault = fmt.Sprintf("does not compile in %s (a catalogue error, not a kill): %v\n%s", pkg, err, out)
			return b
		}
		b.bins = append(b.bins, bin)
	}
	return b
}

// testMutant runs the tests of a built mutant and removes its scratch
// directory.
func (r *runner) testMutant(b built) result {
	m := b.m
	if b.dir != "" {
		defer os.RemoveAll(b.dir)
	}
	if b.fault != "" {
		fmt.Printf("    mutant %s: %s\n", m.ID, b.fault)
		return result{status: broken, by: "does not build", build: b.took}
	}
	res := result{status: survived, build: b.took}
	start := time.Now()
	for i, pkg := range m.Pkgs {
		o := r.test(b.bins[i], pkg, m.Run, m.Bound, b.dir)
		if r.verbose {
			fmt.Printf("%s\n", o.output)
		}
		if by := o.killedBy(); by != "" {
			if len(o.failed) == 0 && o.timeout == "" && !o.hung {
				// The binary failed, but no test did (the leak check of a
				// TestMain, a server that did not start): inconclusive,
				// and a kill counted so could hide a survivor.
				fmt.Printf("    mutant %s: the test binary failed without a failing test; its output ends:\n%s\n", m.ID, tail(o.output))
				res.status, res.by = broken, "inconclusive: "+by
				break
			}
			res.status, res.by = killed, by
			break
		}
		if o.ran == 0 {
			fmt.Printf("    mutant %s: go test -run '%s' %s ran no test: its subset selects nothing\n", m.ID, m.Run, pkg)
			res.status, res.by = broken, "no test ran"
			break
		}
	}
	if res.status == survived {
		res.by = "by none of " + strings.Join(m.Tests, ", ")
	}
	res.run = time.Since(start)
	return res
}

// build compiles pkg's test binary into bin, with overlay if one is given.
func (r *runner) build(bin, overlay, pkg string) ([]byte, error) {
	// No symbol table or DWARF: they only slow the link down.
	args := []string{"test", "-c", "-ldflags=-s -w", "-o", bin}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = r.root
	return cmd.CombinedOutput()
}

// test runs the tests of bin (built from pkg) that match run, once, with
// bound as the binary's timeout, in pkg's directory as go test would; the
// tests' temporary files go below dir.
func (r *runner) test(bin, pkg, run string, bound time.Duration, dir string) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), bound+hangGrace)
	defer cancel()
	tmp, err := os.MkdirTemp(dir, "tmp-")
	if err != nil {
		return outcome{err: err}
	}
	cmd := exec.CommandContext(ctx, bin, "-test.run", run, "-test.count=1", "-test.v",
		"-test.timeout", bound.String())
	cmd.Dir = filepath.Join(r.root, filepath.FromSlash(pkg))
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	o := parse(out.Bytes())
	o.err, o.output = err, out.Bytes()
	o.hung = err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)
	return o
}

var (
	failLine    = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)
	runLine     = regexp.MustCompile(`(?m)^=== RUN\s+\S+`)
	timeoutLine = regexp.MustCompile(`(?m)^panic: test timed out after (\S+)\n(?:\s*running tests:\n\s*(\S+))?`)
)

// parse reads go test -v output.
func parse(out []byte) outcome {
	var o outcome
	o.ran = len(runLine.FindAll(out, -1))
	seen := map[string]bool{}
	for _, m := range failLine.FindAllSubmatch(out, -1) {
		name := string(m[1])
		if !seen[name] {
			seen[name] = true
			o.failed = append(o.failed, name)
		}
	}
	if m := timeoutLine.FindSubmatch(out); m != nil {
		o.timeout = "after " + string(m[1])
		if len(m[2]) > 0 {
			o.timeout += " in " + string(m[2])
		}
	}
	return o
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// tail returns the last lines of out.
func tail(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > 40 {
		lines = append([]string{"..."}, lines[len(lines)-40:]...)
	}
	return strings.Join(lines, "\n")
}
