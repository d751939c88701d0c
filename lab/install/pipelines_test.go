package install_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/lab/internal/timeline"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// The CI steps users paste (action.yml, pipelines/gitlab/) run here as
// their CI system runs them: the action's composite steps with their
// inputs, GitHub's environment files and variables; the template's script
// lines in one shell with GitLab's predefined variables. Each installs the
// CLI from a release served on loopback (built by make release's tool,
// checked against the pins of the action's or template's ref) and locks on
// versitygw.

// TestGitHubAction_TwoJobsTakeTurns: two jobs that use the action with the
// same lock at the same moment run their commands one after the other,
// each gets its epoch as the step's output, and the lock is free after.
func TestGitHubAction_TwoJobsTakeTurns(t *testing.T) {
	t.Parallel()
	p := newPipelines(t)
	lock := p.ns.Name("ci/github")
	tl := filepath.Join(t.TempDir(), "timeline")
	epochs := p.concurrently(t, []string{"job-1", "job-2"}, func(who string) string {
		job := p.githubJob(t, who, tl)
		outputs := job.uses(t, map[string]string{
			"lock": lock, "bucket": p.ns.Bucket, "command": `"$STEP_BINARY"`, "wait": "2m",
		})
		return outputs["epoch"]
	})
	p.checkTurns(t, lock, tl, epochs)
}

// TestGitHubAction_AcquireAndReleaseAcrossSteps: mode acquire holds the
// lock for the job's following steps, with the token in S3LOCK_TOKEN and
// masked in the log; mode release frees it.
func TestGitHubAction_AcquireAndReleaseAcrossSteps(t *testing.T) {
	t.Parallel()
	p := newPipelines(t)
	lock := p.ns.Name("ci/github-steps")
	job := p.githubJob(t, "job", "")
	outputs := job.uses(t, map[string]string{"mode": "acquire", "lock": lock, "bucket": p.ns.Bucket, "lease": "5m"})
	token := job.env["S3LOCK_TOKEN"]
	if token == "" {
		t.Fatal("mode acquire left no S3LOCK_TOKEN in GITHUB_ENV for the following steps")
	}
	if !strings.Contains(job.log.String(), "::add-mask::"+token+"\n") {
		t.Errorf("mode acquire did not mask the token in the log:\n%s", job.log.String())
	}
	st := p.current(t, lock)
	if !st.Held || strconv.FormatUint(st.Epoch, 10) != outputs["epoch"] {
		t.Fatalf("after mode acquire the lock is %+v; want it held at the epoch output %q", st, outputs["epoch"])
	}
	job.uses(t, map[string]string{"mode": "release"})
	if st := p.current(t, lock); st.Held {
		t.Errorf("after mode release the lock is still held: %+v", st)
	}
}

// TestGitLabTemplate_TwoJobsTakeTurns: two jobs that extend .s3lock with
// the same lock at the same moment take turns, and each job's dotenv
// report carries its epoch.
func TestGitLabTemplate_TwoJobsTakeTurns(t *testing.T) {
	t.Parallel()
	p := newPipelines(t)
	lock := p.ns.Name("ci/gitlab")
	tl := filepath.Join(t.TempDir(), "timeline")
	template := p.gitlabTemplate(t)
	epochs := p.concurrently(t, []string{"job-1", "job-2"}, func(who string) string {
		dir := t.TempDir()
		out, err := p.gitlabJob(t, template, dir, p.baseEnv(who, tl), map[string]string{
			"S3LOCK_LOCK": lock, "S3LOCK_BUCKET": p.ns.Bucket, "S3LOCK_COMMAND": `"$STEP_BINARY"`, "S3LOCK_WAIT": "2m",
			"CI_JOB_ID": "20" + who[len(who)-1:], "CI_JOB_NAME": who,
		})
		if err != nil {
			t.Errorf("%s: the template's script: %v\n%s", who, err, out)
			return ""
		}
		noInstallerLeft(t, dir)
		report, err := os.ReadFile(filepath.Join(dir, template.Artifacts.Reports.Dotenv))
		if err != nil {
			t.Errorf("%s: the job's dotenv report: %v", who, err)
			return ""
		}
		return strings.TrimPrefix(strings.TrimSpace(string(report)), "S3LOCK_EPOCH=")
	})
	p.checkTurns(t, lock, tl, epochs)
}

// gitlabJob runs the template's script as a GitLab job of a project whose
// include pins the test's release would, in dir (its TMPDIR too), with env
// and vars besides the template's own variables, and returns its output.
// The pins the job is given (S3LOCK_CHECKSUMS_SHA256) are cliPins, served
// at sourceRef.
func (s *releaseServer) gitlabJob(t *testing.T, template gitlabJob, dir string, env []string, vars map[string]string) ([]byte, error) {
	t.Helper()
	all := map[string]string{
		"S3LOCK_VERSION": releaseVersion, "S3LOCK_REF": sourceRef, "S3LOCK_SOURCE": s.srv.URL + "/source",
		"S3LOCK_DOWNLOAD_URL": s.srv.URL + "/release", "S3LOCK_CHECKSUMS_SHA256": fileSHA256(t, cliPins(t)),
		"CI": "true", "GITLAB_CI": "true", "CI_PROJECT_PATH": "group/project", "CI_PIPELINE_ID": "100",
		"CI_JOB_ID": "200", "CI_JOB_NAME": "job", "TMPDIR": dir,
	}
	for k, v := range vars {
		all[k] = v
	}
	for k, v := range template.Variables {
		if _, set := all[k]; !set {
			all[k] = v
		}
	}
	for k, v := range all {
		env = append(env, k+"="+v)
	}
	script := "set -eo pipefail\n" + strings.Join(template.Script, "\n") + "\n"
	cmd := exec.CommandContext(t.Context(), "bash", "--noprofile", "--norc", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	return cmd.CombinedOutput()
}

// noInstallerLeft fails the test if a job left the template's installer
// directory in its TMPDIR, dir.
func noInstallerLeft(t *testing.T, dir string) {
	t.Helper()
	if left, _ := filepath.Glob(filepath.Join(dir, "s3lock-installer.*")); len(left) > 0 {
		t.Errorf("the template's job left its installer behind: %q", left)
	}
}

// pipelines is what the CI tests share: a release served on loopback with
// the installer, and a namespace on versitygw.
type pipelines struct {
	*releaseServer
	ns *s3test.Namespace
}

func newPipelines(t *testing.T) *pipelines {
	t.Helper()
	return &pipelines{releaseServer: newReleaseServer(t), ns: s3test.New(t)}
}

// sourceRef is the commit the tests' GitLab jobs include the template
// from: the server's /source/ serves the installer and the pins at any
// ref but tamperedRef, where the pins are those of the tampered archive
// (a commit with other pins, or a compromised mirror of the repository).
const (
	sourceRef   = "0123456789abcdef0123456789abcdef01234567"
	tamperedRef = "fedcba9876543210fedcba9876543210fedcba98"
)

// releaseServer serves on loopback what CI jobs download: the release
// (/release/), the same with its archive's bytes changed (/tampered/),
// and the repository's files at a ref as raw.githubusercontent.com does
// (/source/REF/pipelines/install.sh, and checksums.txt with cliPins).
type releaseServer struct {
	root string // the repository
	srv  *httptest.Server
}

func newReleaseServer(t *testing.T) *releaseServer {
	t.Helper()
	root, err := tfharness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rel, pins := cliRelease(t), cliPins(t)
	tampered := t.TempDir()
	entries, err := os.ReadDir(rel)
	if err != nil {
		t.Fatal(err)
	}
	pinsData, err := os.ReadFile(pins)
	if err != nil {
		t.Fatal(err)
	}
	tamperedPins := filepath.Join(t.TempDir(), "checksums.txt")
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(rel, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Name(), ".tar.gz") {
			was := sha256.Sum256(data)
			data = append(data, 0) // gzip ignores it; the SHA-256 does not
			is := sha256.Sum256(data)
			pinsData = bytes.ReplaceAll(pinsData, []byte(hex.EncodeToString(was[:])), []byte(hex.EncodeToString(is[:])))
		}
		if err := os.WriteFile(filepath.Join(tampered, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(tamperedPins, pinsData, 0o644); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /release/", http.StripPrefix("/release/", http.FileServer(http.Dir(rel))))
	mux.Handle("GET /tampered/", http.StripPrefix("/tampered/", http.FileServer(http.Dir(tampered))))
	mux.HandleFunc("GET /source/{ref}/pipelines/install.sh", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join(root, "pipelines", "install.sh"))
	})
	mux.HandleFunc("GET /source/{ref}/pipelines/checksums.txt", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("ref") == tamperedRef {
			http.ServeFile(w, r, tamperedPins)
			return
		}
		http.ServeFile(w, r, pins)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &releaseServer{root: root, srv: srv}
}

// machineEnv is the machine's environment without s3lock's, AWS's or CI
// systems' settings.
func machineEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc([]string{"S3LOCK_", "AWS_", "GITHUB_", "RUNNER_"}, func(p string) bool { return strings.HasPrefix(k, p) }) {
			env = append(env, kv)
		}
	}
	return env
}

// baseEnv is a CI job's environment: the machine's, without s3lock's or
// AWS's settings, plus the store's and the guarded step's.
func (p *pipelines) baseEnv(who, timelineFile string) []string {
	env := machineEnv()
	self, _ := os.Executable()
	tg := p.ns.Target
	return append(env, "S3LOCK_ENDPOINT="+tg.Endpoint, "S3LOCK_USE_PATH_STYLE=true",
		"AWS_ACCESS_KEY_ID="+tg.AccessKey, "AWS_SECRET_ACCESS_KEY="+tg.SecretKey, "AWS_REGION="+tg.Region,
		"AWS_EC2_METADATA_DISABLED=true", "STEP_BINARY="+self, envStep+"=1", "S3LOCK_WHO="+who, timeline.EnvFile+"="+timelineFile)
}

// concurrently runs job for each name at the same moment and returns what
// each returned (its epoch).
func (p *pipelines) concurrently(t *testing.T, names []string, job func(who string) string) map[string]string {
	t.Helper()
	var mu sync.Mutex
	epochs := map[string]string{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, who := range names {
		wg.Go(func() {
			<-start
			epoch := job(who)
			mu.Lock()
			epochs[who] = epoch
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return epochs
}

// checkTurns checks that each job ran its command once, under the epoch
// it reported, never two at once, and that the lock is free after.
func (p *pipelines) checkTurns(t *testing.T, lock, timelineFile string, epochs map[string]string) {
	t.Helper()
	if t.Failed() {
		return
	}
	sections, err := timeline.Read(timelineFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(sections) != len(epochs) {
		t.Fatalf("%d guarded commands ran; want %d", len(sections), len(epochs))
	}
	if err := timeline.Check(sections); err != nil {
		t.Fatalf("the jobs' commands overlapped:\n%v", err)
	}
	for _, s := range sections {
		if got := epochs[s.Who]; got != strconv.FormatUint(s.Epoch, 10) {
			t.Errorf("%s's command ran under epoch %d, but the job reported epoch %q", s.Who, s.Epoch, got)
		}
	}
	if st := p.current(t, lock); st.Held {
		t.Errorf("after the jobs the lock is still held: %+v", st)
	}
}

func (p *pipelines) current(t *testing.T, lock string) s3lock.State {
	t.Helper()
	c, err := s3lock.New(p.ns.Client, p.ns.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Current(t.Context(), lock)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// githubJob is one job of a GitHub Actions workflow run: its environment
// and the files GitHub gives each step.
type githubJob struct {
	p       *pipelines
	ref     string // the action's ref in uses (github.action_ref)
	dir     string
	env     map[string]string // set by steps through GITHUB_ENV
	path    []string          // added by steps through GITHUB_PATH
	base    []string
	log     bytes.Buffer
	actions action
}

type action struct {
	Inputs map[string]struct {
		Default string `yaml:"default"`
	} `yaml:"inputs"`
	Outputs map[string]struct {
		Value string `yaml:"value"`
	} `yaml:"outputs"`
	Runs struct {
		Using string `yaml:"using"`
		Steps []struct {
			ID    string            `yaml:"id"`
			Shell string            `yaml:"shell"`
			Env   map[string]string `yaml:"env"`
			Run   string            `yaml:"run"`
		} `yaml:"steps"`
	} `yaml:"runs"`
}

func (p *pipelines) githubJob(t *testing.T, who, timelineFile string) *githubJob {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(p.root, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	j := &githubJob{p: p, ref: "v" + releaseVersion, dir: t.TempDir(), env: map[string]string{}}
	if err := yaml.Unmarshal(data, &j.actions); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	if j.actions.Runs.Using != "composite" {
		t.Fatalf("action.yml runs %q; this test runs composite actions", j.actions.Runs.Using)
	}
	j.base = append(p.baseEnv(who, timelineFile),
		"GITHUB_ACTIONS=true", "CI=true", "GITHUB_REPOSITORY=owner/repo", "GITHUB_RUN_ID=4242", "GITHUB_RUN_ATTEMPT=1",
		"GITHUB_JOB="+who, "GITHUB_ACTION_PATH="+p.actionCopy(t), "RUNNER_TEMP="+j.dir)
	return j
}

// actionCopy is the action at a ref that pins the test's release, as the
// runner checks it out: the repository's action.yml and pipelines/ with
// cliPins as pipelines/checksums.txt.
func (p *pipelines) actionCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for to, from := range map[string]string{
		"action.yml":               filepath.Join(p.root, "action.yml"),
		"pipelines/install.sh":     filepath.Join(p.root, "pipelines", "install.sh"),
		"pipelines/github/step.sh": filepath.Join(p.root, "pipelines", "github", "step.sh"),
		"pipelines/checksums.txt":  cliPins(t),
	} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, to)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// expression matches ${{ … }} in the action's env values.
var expression = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// uses runs the action's steps as a workflow step `uses:
// s3lock/terraform-provider-s3lock@REF` (j.ref) with inputs would, on a
// runner whose downloads of GitHub's release go to the test's server (the
// download-url input, as a mirror would be given), and returns the
// action's outputs.
func (j *githubJob) uses(t *testing.T, inputs map[string]string) map[string]string {
	t.Helper()
	outputs, err := j.run(t, inputs)
	if err != nil {
		t.Fatal(err)
	}
	return outputs
}

// run is uses, returning a failed step's error.
func (j *githubJob) run(t *testing.T, inputs map[string]string) (map[string]string, error) {
	t.Helper()
	if _, set := inputs["download-url"]; !set {
		inputs["download-url"] = j.p.srv.URL + "/release"
	}
	value := func(expr string) string { // a || b || …, of inputs.X and github.action_ref
		for operand := range strings.SplitSeq(expr, "||") {
			operand = strings.TrimSpace(operand)
			v := ""
			switch {
			case operand == "github.action_ref":
				v = j.ref
			case strings.HasPrefix(operand, "inputs."):
				name := strings.TrimPrefix(operand, "inputs.")
				in, declared := j.actions.Inputs[name]
				if !declared {
					t.Fatalf("action.yml uses the undeclared input %q", name)
				}
				v = in.Default
				if set, ok := inputs[name]; ok {
					v = set
				}
			default:
				t.Fatalf("action.yml has an expression this test does not evaluate: %q", expr)
			}
			if v != "" {
				return v
			}
		}
		return ""
	}
	for name := range inputs {
		if _, ok := j.actions.Inputs[name]; !ok {
			t.Fatalf("the test sets input %q, which action.yml does not declare", name)
		}
	}
	stepOutputs := map[string]map[string]string{}
	for i, step := range j.actions.Runs.Steps {
		if step.Shell != "bash" {
			t.Fatalf("step %d runs in shell %q; this test runs bash steps", i, step.Shell)
		}
		files := map[string]string{}
		for _, f := range []string{"GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH"} {
			files[f] = filepath.Join(j.dir, f+"-"+strconv.Itoa(i))
			if err := os.WriteFile(files[f], nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		env := append([]string{}, j.base...)
		for k, v := range j.env {
			env = append(env, k+"="+v)
		}
		for k, v := range step.Env {
			env = append(env, k+"="+expression.ReplaceAllStringFunc(v, func(m string) string {
				return value(expression.FindStringSubmatch(m)[1])
			}))
		}
		for k, f := range files {
			env = append(env, k+"="+f)
		}
		env = append(env, "PATH="+strings.Join(append(slicesReversed(j.path), os.Getenv("PATH")), string(os.PathListSeparator)))
		cmd := exec.CommandContext(t.Context(), "bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step.Run)
		cmd.Dir, cmd.Env = j.dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		j.log.Write(out.Bytes())
		if err != nil {
			return nil, fmt.Errorf("step %d (%s): %w\n%s", i, step.ID, err, out.String())
		}
		for k, v := range readKV(t, files["GITHUB_ENV"]) {
			j.env[k] = v
		}
		j.path = append(j.path, readLines(t, files["GITHUB_PATH"])...)
		if step.ID != "" {
			stepOutputs[step.ID] = readKV(t, files["GITHUB_OUTPUT"])
		}
	}
	outputs := map[string]string{}
	stepOutput := regexp.MustCompile(`^steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)$`)
	for name, o := range j.actions.Outputs {
		outputs[name] = expression.ReplaceAllStringFunc(o.Value, func(m string) string {
			ref := stepOutput.FindStringSubmatch(expression.FindStringSubmatch(m)[1])
			if ref == nil {
				t.Fatalf("output %s: an expression this test does not evaluate: %q", name, m)
			}
			return stepOutputs[ref[1]][ref[2]]
		})
	}
	return outputs, nil
}

func slicesReversed(s []string) []string {
	out := make([]string, 0, len(s))
	for i := len(s) - 1; i >= 0; i-- {
		out = append(out, s[i])
	}
	return out
}

// readKV reads a GitHub environment file of NAME=value lines.
func readKV(t *testing.T, path string) map[string]string {
	t.Helper()
	kv := map[string]string{}
	for _, line := range readLines(t, path) {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: a line this test does not read (want NAME=value): %q", filepath.Base(path), line)
		}
		kv[k] = v
	}
	return kv
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if sc.Text() != "" {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

// gitlabJob is the .s3lock job of the GitLab CI template.
type gitlabJob struct {
	Variables map[string]string `yaml:"variables"`
	Script    []string          `yaml:"script"`
	Artifacts struct {
		Reports struct {
			Dotenv string `yaml:"dotenv"`
		} `yaml:"reports"`
	} `yaml:"artifacts"`
}

func (s *releaseServer) gitlabTemplate(t *testing.T) gitlabJob {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(s.root, "pipelines", "gitlab", "s3lock.gitlab-ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var jobs map[string]gitlabJob
	if err := yaml.Unmarshal(data, &jobs); err != nil {
		t.Fatalf("the GitLab template: %v", err)
	}
	job, ok := jobs[".s3lock"]
	if !ok || len(job.Script) == 0 || job.Artifacts.Reports.Dotenv == "" {
		t.Fatalf("the GitLab template has no .s3lock job with a script and a dotenv report: %+v", jobs)
	}
	return job
}
