package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/witness"
	"github.com/s3lock/terraform-provider-s3lock/lab/internal/latency"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// Buckets of the run: s3lock's locks, and Terraform's state.
const (
	lockBucket  = "s3lock-bench"
	stateBucket = "tfstate-bench"
)

// lab is one run's store and scratch directory.
type lab struct {
	cfg config
	srv *s3server.Server
	// endpoint is where every client of the run sends its requests: the
	// store's witness (internal/witness), whose record of the lock's
	// writes is checked at the end by the store's clock.
	endpoint string
	scratch  string
	self     string // this binary, for `bench holder`
	// profile is how the taps the lab starts delay requests, and times
	// where they note every answered request's time.
	profile *latency.Profile
	times   *opTimes
	tapSeq  *atomic.Uint64 // taps started in the run: each draws from its own stream
}

// under returns a copy of the lab whose taps delay requests as p says and
// note their times in times.
func (l *lab) under(p *latency.Profile, times *opTimes) *lab {
	pl := *l
	pl.profile, pl.times = p, times
	return &pl
}

// newTap starts a tap in front of the store for one participant.
func (l *lab) newTap() (*tap, error) {
	return startTap(l.endpoint, latency.NewSampler(l.profile, l.cfg.seed, l.tapSeq.Add(1)), l.times)
}

// logf reports progress under the lab's profile.
func (l *lab) logf(format string, args ...any) {
	logf("%s: "+format, append([]any{l.profile.Name}, args...)...)
}

// results is everything one run measured.
type results struct {
	machine machine
	// profiles are the measurements under each latency profile, in the
	// order run; release, crash and renewal are the loopback profile's.
	profiles    []*profileResult
	release     []handoff // s3lock and terraform, every hold time and rep
	crash       []handoff
	waiters     []waitersResult
	many        manyResult
	contended   contendedResult
	uncontended counts // requests of one acquisition and release of a free lock
	renewal     counts // requests of one background renewal
	wall        time.Duration
}

// measure starts the store and runs every measurement on it.
func measure(ctx context.Context, cfg config) (*results, error) {
	scratch, err := os.MkdirTemp("", "s3lock-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logf("starting versitygw")
	srv, err := s3server.Start(ctx, s3server.Options{Dir: scratch + "/store"})
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	wit := witness.New(lockBucket, nil)
	front, err := wit.NewProxy(srv.Endpoint)
	if err != nil {
		return nil, err
	}
	defer front.Close()
	l := &lab{cfg: cfg, srv: srv, endpoint: front.URL, scratch: scratch, self: self, tapSeq: &atomic.Uint64{}}
	res := &results{}
	if res.machine, err = describeMachine(ctx, cfg.terraform); err != nil {
		return nil, err
	}
	for _, step := range []func(context.Context, *results) error{l.createBuckets, l.measureProfiles} {
		if err := step(ctx, res); err != nil {
			return nil, err
		}
	}
	res.machine.loadEnd = loadAverage()
	if err := wit.Check(); err != nil {
		return nil, fmt.Errorf("the store's record of the run breaks the protocol's rules:\n%w", err)
	}
	logf("the store's record: %d writes to epoch objects, by the protocol's rules", len(wit.Writes()))
	return res, nil
}

func (l *lab) createBuckets(ctx context.Context, _ *results) error {
	api, err := newS3Client(ctx, l.endpoint, nil)
	if err != nil {
		return err
	}
	for _, b := range []string{lockBucket, stateBucket} {
		if _, err := api.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			return fmt.Errorf("creating bucket %s: %w", b, err)
		}
	}
	return nil
}

// newS3Client returns an S3 client for the local store at endpoint, built
// as the s3lock CLI builds its own (internal/awsclient: its timeouts and
// retry policy), recording every request into rec unless rec is nil.
func newS3Client(ctx context.Context, endpoint string, rec *recorder) (*s3.Client, error) {
	opts := awsclient.Options{
		Endpoint:     endpoint,
		UsePathStyle: true,
		Region:       s3server.Region,
		AccessKey:    s3server.AccessKeyID,
		SecretKey:    s3server.SecretAccessKey,
		AppID:        "s3lock-bench",
	}
	cfg, err := awsclient.LoadConfig(ctx, opts)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		cfg.HTTPClient = recordingClient{next: cfg.HTTPClient, rec: rec}
	}
	return awsclient.S3Client(cfg, opts), nil
}

// lockClient returns an s3lock client of the bench bucket, as holder, over
// api.
func lockClient(api s3lock.S3API, holder string, opts ...s3lock.Option) (*s3lock.Client, error) {
	return s3lock.New(api, lockBucket, append([]s3lock.Option{s3lock.WithHolder(holder)}, opts...)...)
}

// machine is what the run ran on.
type machine struct {
	nproc     string
	cpu       string
	goVersion string
	terraform string
	date      time.Time
	// loadStart and loadEnd are the load averages when the run started and
	// ended: whatever else ran on the machine meanwhile shows there.
	loadStart, loadEnd string
}

func describeMachine(ctx context.Context, withTerraform bool) (machine, error) {
	m := machine{cpu: cpuModel(), goVersion: runtime.Version(), date: time.Now().UTC(), terraform: "not run", loadStart: loadAverage()}
	if out, err := exec.CommandContext(ctx, "nproc").Output(); err == nil {
		m.nproc = strings.TrimSpace(string(out))
	} else {
		m.nproc = strconv.Itoa(runtime.NumCPU()) + " (runtime.NumCPU; no nproc)"
	}
	if withTerraform {
		path, err := tfharness.CLIPath()
		if err != nil {
			return m, err
		}
		cli, err := tfharness.Detect(ctx, path)
		if err != nil {
			return m, err
		}
		m.terraform = cli.Product + " " + cli.Version
	}
	return m, nil
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown (" + runtime.GOARCH + ", no /proc/cpuinfo)"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown (" + runtime.GOARCH + ")"
}

// loadAverage returns the 1, 5 and 15 minute load averages of
// /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], ", ")
	}
	return "unknown (no /proc/loadavg)"
}
