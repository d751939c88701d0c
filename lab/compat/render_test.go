package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCompatibilityPage_UpToDate: the committed docs/compatibility.md is
// what render makes of the committed compat/results.json and
// compat/known.json; a hand edit, or a run whose results were committed
// without the page (or the other way round), fails here.
func TestCompatibilityPage_UpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	want, err := renderPage(filepath.Join(root, resultsFile), filepath.Join(root, knownFile))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, pageFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is not what compat/results.json and compat/known.json render to: run `go -C lab run ./compat render` (or make compat) and commit the result\n%s",
			pageFile, firstDifference(string(got), want))
	}
}

// firstDifference shows the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n  committed: " + gl + "\n  rendered:  " + wl
		}
	}
	return ""
}

// TestRender_ShowsWhatTheRunsFound: the page states each measured fact of
// the results: verify outcomes, the races, failed tests, leftovers, quirks
// that differ from AWS in bold, and every known store with its sources.
func TestRender_ShowsWhatTheRunsFound(t *testing.T) {
	r := Results{Stores: []StoreResult{
		{Store: "s3rver", Version: "3.7.1", Probe: &Probe{
			Verify: "s3lock: store does not enforce conditional writes", Writers: 8, Rounds: 10,
			CLIVerify: CLIResult{Exit: 1, Line: "s3lock verify: 1 of 5 checks did not pass: conditional writes"},
			Races:     []Race{{Name: "create", Several: 10}, {Name: "cas", Several: 10}, {Name: "delete", Several: 10}},
			Quirks:    []Quirk{{Check: "PUT with If-Match on a missing key", Answer: "200"}},
		}},
		{Store: "versitygw", Version: "v1.8.0", Probe: &Probe{
			Verify: "ok", Writers: 8, Rounds: 10, Latency: Latency{Samples: 5, CreateMs: 0.94, CASMs: 1.1, GetMs: 0.6},
			Races:  []Race{{Name: "create", OneWinner: 10}, {Name: "cas", OneWinner: 10}, {Name: "delete", OneWinner: 7, Several: 3}},
			Quirks: []Quirk{{Check: "PUT with If-Match on a missing key", Answer: "404 NoSuchKey", AsAWS: true}},
		}, Suite: &Suite{
			Date: "2026-12-01", Runs: []SuiteRun{{Passed: true, Tests: 300, Skipped: 2}, {Passed: false, Tests: 300, FailedTests: []string{"TestX"}}},
			Leftovers: []string{"s3lock-probe/permissions/lock-0000000001.json"},
			Bench:     []Bench{{Name: "BenchmarkAcquireRelease/prior=1", Metrics: map[string]float64{"requests/op": 4}}},
		}},
	}}
	k := Known{Stores: []KnownStore{{Name: "Backblaze B2", Status: "Not supported", Details: []string{"501"},
		Sources: []Source{{Title: "lance#5614", URL: "https://github.com/lance-format/lance/issues/5614"}}}}}
	page, err := render(r, k)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| versitygw | `v1.8.0` | passes | exit 0 |",
		"| s3rver | `3.7.1` | **refuses it**: s3lock: store does not enforce conditional writes | exit 1: `s3lock verify: 1 of 5 checks did not pass: conditional writes` |",
		"| s3rver | not run: s3lock refuses this store |",
		"**failed**: TestX",
		"**1 keys left outside `s3lock-test/`**: s3lock-probe/permissions/lock-0000000001.json",
		"| versitygw | one winner in 10 of 10 | one winner in 10 of 10 | one winner in 7 of 10; **several won in 3** |",
		"| s3rver | one winner in 0 of 10; **several won in 10** |",
		"| versitygw | 0.9 ms | 1.1 ms | 0.6 ms |",
		"| PUT with If-Match on a missing key | 404 NoSuchKey | 404 NoSuchKey | **200** |",
		"| versitygw | 4 | – |",
		"### Backblaze B2",
		"- [lance#5614](https://github.com/lance-format/lance/issues/5614)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	// versitygw sorts before s3rver whatever the order in the file.
	if strings.Index(page, "| versitygw | `v1.8.0`") > strings.Index(page, "| s3rver | `3.7.1`") {
		t.Error("stores are not in the order of s3server.Kinds")
	}
	again, err := render(r, k)
	if err != nil || again != page {
		t.Error("render is not deterministic")
	}
}

// TestLoadKnown_RefusesAStoreWithoutSources: every known-but-untested store
// must say where its facts come from.
func TestLoadKnown_RefusesAStoreWithoutSources(t *testing.T) {
	path := filepath.Join(t.TempDir(), "known.json")
	if err := os.WriteFile(path, []byte(`{"stores":[{"name":"X","status":"fine","details":["trust me"],"sources":[]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadKnown(path); err == nil || !strings.Contains(err.Error(), "at least one source") {
		t.Fatalf("loadKnown = %v; want an error about the missing source", err)
	}
}

// TestParseTestEvents_CountsTopLevelTestsAndShowsFailures: go test -json
// output is counted per top-level test (subtests with theirs, Examples as
// tests), and a failed test's output is printed.
func TestParseTestEvents_CountsTopLevelTestsAndShowsFailures(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Test":"TestA"}`,
		`{"Action":"output","Test":"TestA","Output":"ok\n"}`,
		`{"Action":"pass","Test":"TestA"}`,
		`{"Action":"run","Test":"TestB"}`,
		`{"Action":"output","Test":"TestB/sub","Output":"b_test.go:3: boom\n"}`,
		`{"Action":"fail","Test":"TestB/sub"}`,
		`{"Action":"fail","Test":"TestB"}`,
		`{"Action":"skip","Test":"TestC"}`,
		`{"Action":"pass","Test":"Example"}`,
		`{"Action":"fail"}`,
	}, "\n")
	var shown bytes.Buffer
	run, err := parseTestEvents(strings.NewReader(in), &shown)
	if err != nil {
		t.Fatal(err)
	}
	if run.Tests != 4 || run.Skipped != 1 || len(run.FailedTests) != 1 || run.FailedTests[0] != "TestB" {
		t.Errorf("run = %+v; want 4 tests, 1 skipped, TestB failed", run)
	}
	if !strings.Contains(shown.String(), "boom") || strings.Contains(shown.String(), "ok\n") {
		t.Errorf("shown output %q; want TestB's only", shown.String())
	}
}

// TestParseBench_ReadsMetrics: every metric of a benchmark line is kept, by
// unit, under the name without its -GOMAXPROCS suffix.
func TestParseBench_ReadsMetrics(t *testing.T) {
	out := "goos: linux\nBenchmarkHandoff/hold=500ms-2   \t       5\t 712345678 ns/op\t       112.5 handoff-median-ms\t         6.200 waiter-requests/s\nPASS\n"
	b := parseBench(out)
	if len(b) != 1 || b[0].Name != "BenchmarkHandoff/hold=500ms" || b[0].Metrics["handoff-median-ms"] != 112.5 || b[0].Metrics["waiter-requests/s"] != 6.2 {
		t.Fatalf("parseBench = %+v", b)
	}
}
