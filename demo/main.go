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
package main

import (
	"context"
	"errors"
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

	"github.com/s3lock/terraform-provider-s3lock/internal/s3server"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/internal/timeline"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "\ndemo FAILED:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	origin := time.Now()
	say := func(format string, args ...any) {
		fmt.Printf("[%5.1fs] %s\n", time.Since(origin).Seconds(), fmt.Sprintf(format, args...))
	}
	tmp, err := os.MkdirTemp("", "s3lock-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	say("building the provider, the CLI and the S3 server (the first run on a machine takes a few minutes)")
	h, err := tfharness.New(ctx, tmp)
	if err != nil {
		return err
	}
	cli := filepath.Join(tmp, "bin", "s3lock")
	if err := tfharness.Build(ctx, h.RepoRoot, "./cmd/s3lock", cli); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}

	srv, err := s3server.Start(ctx, s3server.Options{Dir: filepath.Join(tmp, "s3")})
	if err != nil {
		return err
	}
	defer srv.Stop()
	say("versitygw is serving S3 at %s (data in %s)", srv.Endpoint, srv.Dir)
	api := s3.New(s3.Options{
		Region: s3server.Region, BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s3server.AccessKeyID, s3server.SecretAccessKey, ""),
	})
	if _, err := api.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return fmt.Errorf("creating bucket %s: %w", bucket, err)
	}
	locks, err := s3lock.New(api, bucket, s3lock.WithHolder("demo-observer"))
	if err != nil {
		return err
	}
	if err := locks.Verify(ctx); err != nil {
		return err
	}
	say("bucket %s created; the store enforces conditional writes (s3lock.Verify)", bucket)

	timelinePath := filepath.Join(tmp, "timeline")
	scenario := filepath.Join(h.RepoRoot, "examples", "scenarios", "local-demo")
	applies := []string{"apply-a", "apply-b"}
	for _, who := range applies {
		dir := filepath.Join(tmp, "work", who)
		if err := tfharness.CopyDir(dir, scenario); err != nil {
			return err
		}
		if out, err := h.Init(ctx, dir); err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
	}
	say("terraform init installed s3lock/s3lock %s from the filesystem mirror in two working directories", tfharness.ProviderVersion)

	type participant struct {
		who string
		cmd *exec.Cmd
		log *os.File
	}
	var parts []participant
	for _, who := range applies {
		dir := filepath.Join(tmp, "work", who)
		cmd := h.Command(ctx, dir, "apply", "-auto-approve", "-no-color",
			"-var", "endpoint="+srv.Endpoint, "-var", "bucket="+bucket,
			"-var", "access_key="+s3server.AccessKeyID, "-var", "secret_key="+s3server.SecretAccessKey,
			"-var", "lock_name="+lockName, "-var", "who="+who, "-var", "step_command="+shellQuote(self)+" step")
		cmd.Env = append(cmd.Env, timeline.EnvFile+"="+timelinePath)
		parts = append(parts, participant{who: who, cmd: cmd})
	}
	migration := exec.CommandContext(ctx, cli, "run", "--wait", "5m", "--lease", "30s", "--holder", "migration", lockName, "--", self, "step")
	migration.Env = append(os.Environ(),
		"S3LOCK_BUCKET="+bucket, "S3LOCK_ENDPOINT="+srv.Endpoint, "S3LOCK_USE_PATH_STYLE=true",
		"AWS_REGION="+s3server.Region, "AWS_ACCESS_KEY_ID="+s3server.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+s3server.SecretAccessKey,
		"AWS_PROFILE=", "AWS_SESSION_TOKEN=", "S3LOCK_WHO=migration", timeline.EnvFile+"="+timelinePath)
	migration.Cancel = func() error { return migration.Process.Signal(os.Interrupt) }
	parts = append(parts, participant{who: "migration", cmd: migration})

	launched := map[string]time.Time{}
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	say("starting %s and `s3lock run %s -- <migration step>` at the same moment", strings.Join(applies, " and "), lockName)
	for i := range parts {
		p := &parts[i]
		if p.log, err = os.Create(filepath.Join(tmp, p.who+".log")); err != nil {
			return err
		}
		defer p.log.Close()
		p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	}
	for i := range parts {
		p := &parts[i]
		launched[p.who] = time.Now()
		if err := p.cmd.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", p.who, err)
		}
		wg.Go(func() {
			errs[i] = p.cmd.Wait()
			status := "finished"
			if errs[i] != nil {
				status = "FAILED (" + errs[i].Error() + ")"
			}
			say("%-9s %s after %.1fs", p.who, status, time.Since(launched[p.who]).Seconds())
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
	if err := errors.Join(failed...); err != nil {
		return err
	}

	sections, err := timeline.Read(timelinePath)
	if err != nil {
		return err
	}
	fmt.Printf("\nTimeline of the guarded steps (each holds the lock %s; t+ from the first start):\n\n", hold)
	if len(sections) > 0 {
		timeline.Render(os.Stdout, sections, sections[0].Start, launched)
	}
	// A run's lease is released by its guard as terraform exits: give it
	// a moment.
	st, err := locks.Current(ctx, lockName)
	for deadline := time.Now().Add(releaseWait); err == nil && st.Held && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		st, err = locks.Current(ctx, lockName)
	}
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
	return nil
}

// shellQuote quotes s for /bin/sh (local-exec runs its command with sh -c).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
