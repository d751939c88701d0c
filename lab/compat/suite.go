package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// suiteCommand runs the SDK suite on one store: -runs times on one shared
// bucket, a leftover check after each run, `s3lock verify` and the
// benchmarks; it records the outcome and fails if any step did.
func suiteCommand(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("suite", flag.ContinueOnError)
	store := fs.String("store", "", "the store ("+kindNames()+")")
	runs := fs.Int("runs", 2, "how many times to run the suite on the one bucket")
	pattern := fs.String("run", "", "run only the tests matching this regexp (go test -run), for a reduced pass")
	skip := fs.String("skip", "", "skip the tests matching this regexp (go test -skip), for a reduced pass")
	benchtime := fs.String("benchtime", "5x", "go test -benchtime for the benchmarks; empty: no benchmarks")
	record := fs.Bool("record", true, "record the outcome in "+resultsFile+" and render the page (only for a full pass)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	kind, err := s3server.ParseKind(*store)
	if err != nil {
		return err
	}
	if kind == s3server.S3rver {
		return errors.New("suite: s3rver ignores conditional writes, so the suite cannot pass on it; its refusal is checked by TestVerify_RefusesAStoreThatIgnoresConditionalWrites (cmd/s3lock)")
	}
	if *runs < 1 {
		return errors.New("suite: -runs must be at least 1")
	}
	s := &suiteRunner{kind: kind, pattern: *pattern, skip: *skip}
	if s.dir, err = os.MkdirTemp("", "s3lock-suite-"+string(kind)+"-"); err != nil {
		return err
	}
	defer os.RemoveAll(s.dir)
	out, err := s.run(ctx, *runs, *benchtime)
	if err != nil {
		return err
	}
	fmt.Printf("=== %s: %s\n", kind, summary(out))
	if *record && *pattern == "" && *skip == "" {
		version := ""
		if st, err := s.start(ctx); err == nil {
			version = st.Version()
			st.Stop()
		}
		err := updateResults(resultsFile, func(r *Results) { r.store(string(kind), version).Suite = out })
		if err != nil {
			return err
		}
		if err := renderFiles(); err != nil {
			return err
		}
	}
	if !out.Passed {
		return fmt.Errorf("%s: the store matrix failed (%s)", kind, summary(out))
	}
	return nil
}

type suiteRunner struct {
	kind    s3server.Kind
	dir     string // the store's data directory, kept across runs
	pattern string // go test -run
	skip    string // go test -skip
}

// env is the environment of a `go test` on the store: S3LOCK_TEST_STORE in
// shared-bucket mode on the runner's data directory.
func (s *suiteRunner) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "S3LOCK_TEST_") {
			env = append(env, kv)
		}
	}
	return append(env, s3test.EnvStore+"="+string(s.kind), s3test.EnvStoreDir+"="+s.dir)
}

func (s *suiteRunner) start(ctx context.Context) (s3server.Store, error) {
	return s3server.StartStore(ctx, s.kind, s3server.StoreOptions{Dir: s.dir})
}

func (s *suiteRunner) run(ctx context.Context, runs int, benchtime string) (*Suite, error) {
	out := &Suite{Date: today(), Passed: true}
	for i := range runs {
		fmt.Printf("=== %s: SDK suite, run %d of %d (go test -race ./s3lock/ on bucket %s)\n", s.kind, i+1, runs, s3test.StoreBucket)
		run, err := s.suite(ctx)
		if err != nil {
			return nil, err
		}
		leftovers, inside, err := s.leftovers(ctx)
		if err != nil {
			return nil, err
		}
		run.Inside = inside
		out.Runs = append(out.Runs, run)
		out.Leftovers = mergeSorted(out.Leftovers, leftovers)
		out.Passed = out.Passed && run.Passed && len(leftovers) == 0
		for _, k := range leftovers {
			fmt.Printf("=== %s: left outside %s: %s\n", s.kind, s3test.TestPrefix, k)
		}
	}
	st, err := s.start(ctx)
	if err != nil {
		return nil, err
	}
	cli, cleanup, err := buildCLI(ctx)
	if err == nil {
		out.CLIVerify, err = runCLIVerify(ctx, cli, st, s3test.StoreBucket, s3test.TestPrefix+"cli-verify-"+s3test.RandomHex(4)+"/")
		cleanup()
	}
	st.Stop()
	if err != nil {
		return nil, err
	}
	fmt.Printf("=== %s: s3lock verify: exit %d %s\n", s.kind, out.CLIVerify.Exit, out.CLIVerify.Line)
	out.Passed = out.Passed && out.CLIVerify.Exit == 0
	if benchtime != "" {
		fmt.Printf("=== %s: benchmarks (go test -bench . -benchtime %s ./s3lock/)\n", s.kind, benchtime)
		bench, ok, err := s.bench(ctx, benchtime)
		if err != nil {
			return nil, err
		}
		out.Bench = bench
		out.Passed = out.Passed && ok
	}
	leftovers, _, err := s.leftovers(ctx)
	if err != nil {
		return nil, err
	}
	out.Leftovers = mergeSorted(out.Leftovers, leftovers)
	out.Passed = out.Passed && len(out.Leftovers) == 0
	return out, nil
}

// suiteLimit bounds one run of the SDK suite (go test -timeout).
const suiteLimit = "30m"

// suite runs the SDK's tests once, Examples included, printing the output
// of each test that fails.
func (s *suiteRunner) suite(ctx context.Context) (SuiteRun, error) {
	args := []string{"test", "-count=1", "-race", "-timeout", suiteLimit, "-json"}
	if s.pattern != "" {
		args = append(args, "-run", s.pattern)
	}
	if s.skip != "" {
		args = append(args, "-skip", s.skip)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./s3lock/")...)
	cmd.Env = s.env()
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return SuiteRun{}, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return SuiteRun{}, err
	}
	run, perr := parseTestEvents(stdout, os.Stdout)
	werr := cmd.Wait()
	run.Seconds = int(time.Since(start).Seconds())
	if perr != nil {
		return run, perr
	}
	var exit *exec.ExitError
	if werr != nil && !errors.As(werr, &exit) {
		return run, werr
	}
	run.Passed = werr == nil && len(run.FailedTests) == 0
	fmt.Printf("=== %s: %d tests, %d skipped, %d failed %q, in %ds\n", s.kind, run.Tests, run.Skipped, len(run.FailedTests), run.FailedTests, run.Seconds)
	return run, nil
}

// testEvent is one line of `go test -json`.
type testEvent struct {
	Action string
	Test   string
	Output string
}

// parseTestEvents reads `go test -json` output: it counts the top-level
// tests (Examples are tests) and writes the output of each failed test, and
// of the package when it failed outside a test, to w.
func parseTestEvents(r io.Reader, w io.Writer) (SuiteRun, error) {
	var run SuiteRun
	output := map[string]*bytes.Buffer{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var ev testEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			fmt.Fprintln(w, sc.Text()) // build errors and the like are not JSON
			continue
		}
		top, _, _ := strings.Cut(ev.Test, "/")
		if output[top] == nil {
			output[top] = &bytes.Buffer{}
		}
		switch ev.Action {
		case "output":
			output[top].WriteString(ev.Output)
		case "pass", "skip", "fail":
			if ev.Test == "" {
				if ev.Action == "fail" && len(run.FailedTests) == 0 {
					_, _ = io.Copy(w, output[""]) // the package failed outside any test
					run.FailedTests = append(run.FailedTests, "(package)")
				}
				continue
			}
			if ev.Test != top {
				continue // subtests count with their test
			}
			run.Tests++
			switch ev.Action {
			case "skip":
				run.Skipped++
			case "fail":
				run.FailedTests = append(run.FailedTests, ev.Test)
				_, _ = io.Copy(w, output[top])
			}
			delete(output, top)
		}
	}
	return run, sc.Err()
}

// leftovers starts the store on the runner's data directory and lists what
// the shared bucket holds outside the tests' prefix.
func (s *suiteRunner) leftovers(ctx context.Context) ([]string, int, error) {
	st, err := s.start(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer st.Stop()
	outside, inside, err := s3test.Outside(ctx, s3server.NewClient(st, nil), s3test.StoreBucket, s3test.TestPrefix)
	slices.Sort(outside)
	return outside, inside, err
}

// bench runs the SDK's benchmarks and collects their metrics.
func (s *suiteRunner) bench(ctx context.Context, benchtime string) ([]Bench, bool, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", "^$", "-bench", ".", "-benchtime", benchtime, "-timeout", suiteLimit, "./s3lock/")
	cmd.Env = s.env()
	var buf bytes.Buffer
	cmd.Stdout = io.MultiWriter(os.Stdout, &buf)
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return nil, false, err
	}
	benches := parseBench(buf.String())
	return benches, err == nil && len(benches) > 0, nil
}

// parseBench reads the result lines of `go test -bench`:
// "BenchmarkX/sub-2  5  123 ns/op  3.000 requests/op ...".
func parseBench(out string) []Bench {
	var benches []Bench
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		b := Bench{Name: trimProcs(f[0]), Metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				b.Metrics[f[i+1]] = v
			}
		}
		benches = append(benches, b)
	}
	return benches
}

// trimProcs drops the -GOMAXPROCS suffix of a benchmark's name.
func trimProcs(name string) string {
	if i := strings.LastIndex(name, "-"); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

func mergeSorted(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

func summary(s *Suite) string {
	var parts []string
	for i, r := range s.Runs {
		state := "passed"
		if !r.Passed {
			state = fmt.Sprintf("failed %s", strings.Join(r.FailedTests, ", "))
		}
		parts = append(parts, fmt.Sprintf("run %d %s (%d tests, %d skipped, %ds)", i+1, state, r.Tests, r.Skipped, r.Seconds))
	}
	parts = append(parts, fmt.Sprintf("%d keys left outside %s", len(s.Leftovers), s3test.TestPrefix),
		fmt.Sprintf("s3lock verify exit %d", s.CLIVerify.Exit), fmt.Sprintf("%d benchmarks", len(s.Bench)))
	return strings.Join(parts, "; ")
}

// buildCLI builds the s3lock CLI into a temporary directory; cleanup
// removes it.
func buildCLI(ctx context.Context) (string, func(), error) {
	dir, err := os.MkdirTemp("", "s3lock-compat-cli-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	bin := filepath.Join(dir, "s3lock")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/s3lock")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("building the s3lock CLI: %w", err)
	}
	return bin, cleanup, nil
}

// cliLimit bounds one `s3lock verify`.
const cliLimit = 2 * time.Minute

// runCLIVerify runs `s3lock verify --prefix prefix` against bucket on st,
// with only st's settings in the environment.
func runCLIVerify(ctx context.Context, cli string, st s3server.Store, bucket, prefix string) (CLIResult, error) {
	home, err := os.MkdirTemp("", "s3lock-compat-home-")
	if err != nil {
		return CLIResult{}, err
	}
	defer os.RemoveAll(home)
	ctx, cancel := context.WithTimeout(ctx, cliLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "verify", "--prefix", prefix)
	creds := st.Credentials()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "S3LOCK_") && !strings.HasPrefix(k, "AWS_") && k != "HOME" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+home,
		"S3LOCK_ENDPOINT="+st.URL(), "S3LOCK_BUCKET="+bucket, "S3LOCK_USE_PATH_STYLE=true",
		"AWS_ACCESS_KEY_ID="+creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey, "AWS_REGION="+s3server.Region,
		"AWS_CONFIG_FILE="+filepath.Join(home, "aws-config"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = io.Discard
	err = cmd.Run()
	res := CLIResult{Line: strings.TrimSpace(stderr.String())}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.Exit = exit.ExitCode()
	default:
		return res, fmt.Errorf("running s3lock verify: %w", err)
	}
	return res, nil
}
