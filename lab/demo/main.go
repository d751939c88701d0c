// Command demo is what `make demo` runs: the whole of s3lock on one machine,
// offline, with no AWS account. It builds the Terraform provider and the
// CLI, starts a local S3-compatible server (versitygw) on loopback, installs
// the provider for terraform through a filesystem mirror, then starts at the
// same moment two `terraform apply` runs of examples/scenarios/local-demo
// (each guards a step with an ephemeral s3lock_lease, held from its plan to
// the end of its apply) and an `s3lock run` migration step, all contending
// for one lock. It prints the timeline of who held which epoch when, and
// exits non-zero if two guarded steps overlapped or a participant used more
// than one epoch.
//
// `demo step` is the guarded step itself: it records when it ran, under
// which epoch, into the timeline.
//
// The README shows a run's timeline: `demo -readme` (make demo
// DEMOARGS=-readme) writes this run's there, and every other run fails if
// the README's no longer has the participants, epochs and columns of a run
// (readme.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/lab/internal/timeline"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/storecheck"
)

const (
	bucket   = "s3lock-demo"
	lockName = "demo/deploy"
	// hold is how long each guarded step takes.
	hold = 2 * time.Second
	// releaseWait bounds the wait for the last run's lease to be released
	// after its terraform exited (its guard does it within a second).
	releaseWait = 10 * time.Second
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "step" {
		if err := timeline.RunStep(hold); err != nil {
			fmt.Fprintln(os.Stderr, "demo step:", err)
			os.Exit(1)
		}
		return
	}
	writeReadme := flag.Bool("readme", false, "write this run's timeline into README.md as its sample (else check that the sample there looks like this run)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *writeReadme); err != nil {
		fmt.Fprintln(os.Stderr, "\ndemo FAILED:", err)
		os.Exit(1)
	}
}

// demo is one run of the demo: its scratch directory, the binaries it runs,
// the local S3 server and the lock client that observes the lock.
type demo struct {
	origin   time.Time
	tmp      string
	h        *tfharness.Harness
	cli      string // the s3lock CLI
	self     string // this binary; `self step` is the guarded step
	srv      *s3server.Server
	locks    *s3lock.Client
	timeline string // the file the guarded steps record into

	writeReadme bool // write the run's timeline into the README, not check it
}

// participant is one process contending for the lock, with its output log.
type participant struct {
	who string
	cmd *exec.Cmd
	log *os.File
}

// applies are the terraform working directories, one apply run each.
var applies = []string{"apply-a", "apply-b"}

// migrationWho names the `s3lock run` participant.
const migrationWho = "migration"

// run runs the whole demo in a scratch directory it removes afterwards and
// returns an error if any participant failed or the lock was misused.
func run(ctx context.Context, writeReadme bool) error {
	d := &demo{origin: time.Now(), writeReadme: writeReadme}
	tmp, err := os.MkdirTemp("", "s3lock-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	d.tmp, d.timeline = tmp, filepath.Join(tmp, "timeline")

	if err := d.build(ctx); err != nil {
		return err
	}
	if d.srv, err = s3server.Start(ctx, s3server.Options{Dir: filepath.Join(tmp, "s3")}); err != nil {
		return err
	}
	defer d.srv.Stop()
	d.say("versitygw is serving S3 at %s (data in %s)", d.srv.Endpoint, d.srv.Dir)
	if err := d.createBucket(ctx); err != nil {
		return err
	}
	if err := d.initWorkDirs(ctx); err != nil {
		return err
	}
	parts := d.participants(ctx)
	launched, err := d.runAll(parts)
	if err != nil {
		return err
	}
	return d.report(ctx, parts, launched)
}

// say prints a progress line stamped with the time since the demo started.
func (d *demo) say(format string, args ...any) {
	fmt.Printf("[%5.1fs] %s\n", time.Since(d.origin).Seconds(), fmt.Sprintf(format, args...))
}

// build builds the provider (through the terraform harness) and the s3lock
// CLI, and finds this binary, which the participants run as their step.
func (d *demo) build(ctx context.Context) error {
	d.say("building the provider, the CLI and the S3 server (the first run on a machine takes a few minutes)")
	h, err := tfharness.New(ctx, d.tmp)
	if err != nil {
		return err
	}
	d.h = h
	d.cli = filepath.Join(d.tmp, "bin", "s3lock")
	if err := tfharness.Build(ctx, h.RepoRoot, "./cmd/s3lock", d.cli); err != nil {
		return err
	}
	d.self, err = os.Executable()
	return err
}

// createBucket creates the demo bucket on the local server and checks,
// through the observer's lock client, that it enforces conditional writes.
func (d *demo) createBucket(ctx context.Context) error {
	api := s3.New(s3.Options{
		Region: s3server.Region, BaseEndpoint: aws.String(d.srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s3server.AccessKeyID, s3server.SecretAccessKey, ""),
	})
	if _, err := api.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return fmt.Errorf("creating bucket %s: %w", bucket, err)
	}
	locks, err := s3lock.New(api, bucket, s3lock.WithHolder("demo-observer"))
	if err != nil {
		return err
	}
	if err := storecheck.Verify(ctx, locks, ""); err != nil {
		return err
	}
	d.locks = locks
	d.say("bucket %s created; the store enforces conditional writes (storecheck.Verify)", bucket)
	return nil
}

// workDir is the terraform working directory of the apply run who.
func (d *demo) workDir(who string) string {
	return filepath.Join(d.tmp, "work", who)
}

// initWorkDirs copies the local-demo scenario into each apply's working
// directory and runs terraform init there.
func (d *demo) initWorkDirs(ctx context.Context) error {
	scenario := filepath.Join(d.h.RepoRoot, "examples", "scenarios", "local-demo")
	for _, who := range applies {
		dir := d.workDir(who)
		if err := tfharness.CopyDir(dir, scenario); err != nil {
			return err
		}
		if out, err := d.h.Init(ctx, dir); err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
	}
	d.say("terraform init installed s3lock/s3lock %s from the filesystem mirror in two working directories", tfharness.ProviderVersion)
	return nil
}

// participants returns the processes that contend for the lock, not yet
// started: a terraform apply per working directory, then the `s3lock run`
// migration step.
func (d *demo) participants(ctx context.Context) []participant {
	var parts []participant
	for _, who := range applies {
		cmd := d.h.Command(ctx, d.workDir(who), "apply", "-auto-approve", "-no-color",
			"-var", "endpoint="+d.srv.Endpoint, "-var", "bucket="+bucket,
			"-var", "access_key="+s3server.AccessKeyID, "-var", "secret_key="+s3server.SecretAccessKey,
			"-var", "lock_name="+lockName, "-var", "who="+who, "-var", "step_command="+shellQuote(d.self)+" step")
		cmd.Env = append(cmd.Env, timeline.EnvFile+"="+d.timeline)
		parts = append(parts, participant{who: who, cmd: cmd})
	}
	migration := exec.CommandContext(ctx, d.cli, "run", "--wait", "5m", "--lease", "30s", "--holder", migrationWho, lockName, "--", d.self, "step")
	migration.Env = append(os.Environ(),
		"S3LOCK_BUCKET="+bucket, "S3LOCK_ENDPOINT="+d.srv.Endpoint, "S3LOCK_USE_PATH_STYLE=true",
		"AWS_REGION="+s3server.Region, "AWS_ACCESS_KEY_ID="+s3server.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+s3server.SecretAccessKey,
		"AWS_PROFILE=", "AWS_SESSION_TOKEN=", "S3LOCK_WHO="+migrationWho, timeline.EnvFile+"="+d.timeline)
	migration.Cancel = func() error { return migration.Process.Signal(os.Interrupt) }
	return append(parts, participant{who: migrationWho, cmd: migration})
}

// runAll starts every participant at the same moment, each writing to its
// own log, and waits for them all. It returns when each was started, and an
// error with the output of every participant that failed.
func (d *demo) runAll(parts []participant) (map[string]time.Time, error) {
	d.say("starting %s and `s3lock run %s -- <migration step>` at the same moment", strings.Join(applies, " and "), lockName)
	for i := range parts {
		p := &parts[i]
		var err error
		if p.log, err = os.Create(filepath.Join(d.tmp, p.who+".log")); err != nil {
			return nil, err
		}
		defer p.log.Close()
		p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	}
	launched := map[string]time.Time{}
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	for i := range parts {
		p := &parts[i]
		start := time.Now()
		launched[p.who] = start
		if err := p.cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting %s: %w", p.who, err)
		}
		wg.Go(func() {
			errs[i] = p.cmd.Wait()
			status := "finished"
			if errs[i] != nil {
				status = "FAILED (" + errs[i].Error() + ")"
			}
			d.say("%-9s %s after %.1fs", p.who, status, time.Since(start).Seconds())
		})
	}
	wg.Wait()
	var failed []error
	for i, p := range parts {
		if errs[i] != nil {
			log, _ := os.ReadFile(p.log.Name())
			failed = append(failed, fmt.Errorf("%s: %w\n--- %s output ---\n%s", p.who, errs[i], p.who, log))
		}
	}
	return launched, errors.Join(failed...)
}

// report prints the timeline of the guarded steps and the state of the lock
// after the runs, and returns an error unless every participant used one
// epoch, the steps never overlapped and the lock is free.
func (d *demo) report(ctx context.Context, parts []participant, launched map[string]time.Time) error {
	sections, err := timeline.Read(d.timeline)
	if err != nil {
		return err
	}
	fmt.Printf("\nTimeline of the guarded steps (each holds the lock %s; t+ from the first start):\n\n", hold)
	if len(sections) > 0 {
		timeline.Render(os.Stdout, sections, sections[0].Start, launched)
	}
	st, err := d.awaitRelease(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("\nLock %s after the runs: newest epoch %d, held=%v, released=%v by %s.\n", lockName, st.Epoch, st.Held, st.Released, st.Holder)
	fmt.Printf("(One epoch per participant: each terraform apply holds the lock from its plan to the end of its apply, so no run plans\n"+
		" while another is about to change what it plans against; %d participants used %d epochs.)\n", len(parts), st.Epoch)

	if st.Epoch != uint64(len(parts)) {
		return fmt.Errorf("%d participants used %d epochs of lock %s; want one each", len(parts), st.Epoch, lockName)
	}
	if len(sections) != len(parts) {
		return fmt.Errorf("expected %d guarded steps in the timeline, found %d", len(parts), len(sections))
	}
	if err := timeline.Check(sections); err != nil {
		return fmt.Errorf("the critical sections overlapped:\n%w", err)
	}
	if st.Held {
		return fmt.Errorf("lock %s is still held after every participant finished", lockName)
	}
	fmt.Printf("\nOK: %d guarded steps ran one at a time, in epoch order, and the lock is free.\n", len(sections))
	return d.readmeSample(sections, launched)
}

// readmeSample writes the run's timeline into the README as its sample
// (-readme), or checks that the sample there still looks like this run.
func (d *demo) readmeSample(sections []timeline.Section, launched map[string]time.Time) error {
	readme := filepath.Join(d.h.RepoRoot, "README.md")
	if !d.writeReadme {
		return checkSample(readme, sections)
	}
	sample, err := renderSample(sections, launched)
	if err != nil {
		return err
	}
	if err := writeSample(readme, sample); err != nil {
		return err
	}
	d.say("wrote this run's timeline into %s", readme)
	return nil
}

// awaitRelease returns the state of the lock once it is free, or after
// releaseWait if it is still held: a run's lease is released by its guard
// as terraform exits, so give it a moment.
func (d *demo) awaitRelease(ctx context.Context) (s3lock.State, error) {
	st, err := d.locks.Current(ctx, lockName)
	for deadline := time.Now().Add(releaseWait); err == nil && st.Held && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		st, err = d.locks.Current(ctx, lockName)
	}
	return st, err
}

// shellQuote quotes s for /bin/sh (local-exec runs its command with sh -c).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
