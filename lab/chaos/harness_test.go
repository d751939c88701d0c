//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/witness"
	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/faultproxy"
	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/record"
	"github.com/s3lock/terraform-provider-s3lock/lab/internal/latency"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// lab is one run: its store, proxies, processes and records.
type lab struct {
	t       *testing.T
	sc      scenario
	dir     string // the run's files, kept if the test fails
	history string // the processes' history files
	logs    string // the processes' output
	bins    binaries
	store   *store
	bucket  string // scenario.bucketName
	// witness records every write to the lock's epoch objects, in front
	// of the store (every client's requests pass it, the suite's too).
	witness *witness.Witness
	front   *witness.Proxy
	s3      *s3.Client // the suite's own
	lock    *s3lock.Client
	proxies map[string]*faultproxy.Proxy // by slot
	cloud   *faultproxy.Proxy            // plays the scenario's latency profile in front of the store; nil without one
	procs   procTable
	events  eventLog
	slots   sync.WaitGroup
	start   time.Time
}

func newLab(t *testing.T, sc scenario) *lab {
	t.Helper()
	l := &lab{t: t, sc: sc, bins: buildBinaries(t), proxies: map[string]*faultproxy.Proxy{}}
	l.makeDirs()
	log, err := os.Create(filepath.Join(l.logs, "versitygw.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	if l.store, err = startStore(t.Context(), filepath.Join(l.dir, "data"), log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.teardown)
	l.bucket = sc.bucketName()
	storeURL := l.store.Endpoint
	if sc.directory {
		d, err := s3test.StartDirectoryBuckets(l.store.Endpoint, s3server.Region, s3server.AccessKeyID, s3server.SecretAccessKey)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		if err := d.CreateBucket(t.Context(), l.bucket); err != nil {
			t.Fatal(err)
		}
		storeURL = d.URL
	}
	l.witness = witness.New(l.bucket, record.Now)
	if l.front, err = l.witness.NewProxy(l.withLatency(storeURL)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.front.Close)
	tg := s3test.Target{Endpoint: l.front.URL, Region: s3server.Region, AccessKey: s3server.AccessKeyID,
		SecretKey: s3server.SecretAccessKey, PathStyle: true, Local: true}
	if l.s3, err = s3test.BuildClient(t.Context(), tg); err != nil {
		t.Fatal(err)
	}
	if !sc.directory {
		if _, err := l.s3.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(l.bucket)}); err != nil {
			t.Fatal(err)
		}
	}
	if l.lock, err = s3lock.New(l.s3, l.bucket, s3lock.WithHolder("chaos-suite"), s3lock.WithRequestTimeout(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	l.startProxies()
	return l
}

// latencyStream is the stream of the run's seed that the latency proxy
// draws its delays from: "latency" in ASCII, a stream no other generator of
// the run uses.
const latencyStream = 0x6c6174656e6379

// withLatency puts a proxy that plays the scenario's latency profile in
// front of the store at target and returns where to send requests instead
// (target itself without a profile). It sits behind the witness, as part of
// the store: one proxy delays every process and the suite alike, and the
// witness's brackets hold the store's action with its delay. A store that
// is down is answered with 502 Bad Gateway, as the witness answers it.
func (l *lab) withLatency(target string) string {
	if l.sc.latency == nil {
		return target
	}
	p, err := faultproxy.New(target, l.sc.seed)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(p.Close)
	p.Latency(latency.NewSampler(l.sc.latency, l.sc.seed, latencyStream).Draw)
	l.cloud = p
	return p.URL
}

// makeDirs creates the run's directory; it is removed when the test passes
// and kept, for its histories and logs, when it fails (or
// S3LOCK_CHAOS_KEEP=1).
func (l *lab) makeDirs() {
	dir, err := os.MkdirTemp("", "s3lock-chaos-")
	if err != nil {
		l.t.Fatal(err)
	}
	l.dir, l.history, l.logs = dir, filepath.Join(dir, "history"), filepath.Join(dir, "logs")
	for _, d := range []string{l.history, l.logs, filepath.Join(dir, "data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			l.t.Fatal(err)
		}
	}
	l.t.Cleanup(func() {
		if l.t.Failed() || os.Getenv("S3LOCK_CHAOS_KEEP") == "1" {
			fmt.Printf("chaos: the run's histories and logs are in %s\n", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
}

func (l *lab) startProxies() {
	n := uint64(0)
	add := func(slot string, proxied bool) {
		if !proxied {
			return
		}
		n++
		p, err := faultproxy.New(l.front.URL, l.sc.seed+n)
		if err != nil {
			l.t.Fatal(err)
		}
		l.t.Cleanup(p.Close)
		l.proxies[slot] = p
	}
	for _, w := range l.sc.workers {
		add(w.slot, w.proxied)
	}
	for _, r := range l.sc.runners {
		add(r.slot, r.proxied)
	}
}

// teardown kills whatever a failed or interrupted run left running.
func (l *lab) teardown() {
	l.procs.close()
	for _, p := range l.procs.live() {
		p.signal(syscall.SIGKILL)
		<-p.done
	}
	l.slots.Wait()
	for pid := range strays(l.bins.dir, l.procs.snapshot()) {
		killPid(pid)
	}
	l.store.kill()
}

// endpoint returns where slot's processes send their requests.
func (l *lab) endpoint(slot string) string {
	if p := l.proxies[slot]; p != nil {
		return p.URL
	}
	return l.front.URL
}

// env is the whole environment of a process: the store's credentials and
// nothing of the machine's AWS or s3lock settings.
func (l *lab) env(slot string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + l.dir,
		"AWS_ACCESS_KEY_ID=" + s3server.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + s3server.SecretAccessKey,
		"AWS_REGION=" + s3server.Region,
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true",
		"S3LOCK_BUCKET=" + l.bucket,
		"S3LOCK_ENDPOINT=" + l.endpoint(slot),
		"S3LOCK_USE_PATH_STYLE=true",
	}
}

// workerArgs are the worker's flags common to both kinds of slot.
func (l *lab) workerArgs(slot, name string) []string {
	return []string{
		"-endpoint", l.endpoint(slot), "-bucket", l.bucket, "-lock", lockName, "-register", registerKey,
		"-name", name, "-history", filepath.Join(l.history, name+".jsonl"),
		"-lease", l.sc.leaseDuration().String(), "-work", workMax.String(),
		"-seed", strconv.FormatUint(l.sc.seed+uint64(len(l.procs.snapshot()))+1, 10),
	}
}

func (l *lab) startWorker(w workerSpec, n int) (*proc, error) {
	name := fmt.Sprintf("%s.%d", w.slot, n)
	args := l.workerArgs(w.slot, name)
	if w.clockOffset != 0 {
		args = append(args, "-clock-offset", w.clockOffset.String())
	}
	if w.jumps {
		args = append(args, "-clock-jump-every", clockJumpEvery.String(), "-clock-jump-by", clockJump.String())
	}
	if w.broken {
		args = append(args, "-broken")
	}
	if w.shared > 0 {
		args = append(args, "-shared", fmt.Sprint(w.shared))
	}
	cmd := exec.Command(l.bins.worker, args...)
	cmd.Env = l.env(w.slot)
	return l.procs.start(name, w.slot, false, cmd, filepath.Join(l.logs, name+".log"))
}

func (l *lab) startRunner(r runnerSpec, n int) (*proc, error) {
	name := fmt.Sprintf("%s.%d", r.slot, n)
	args := append([]string{"run", "--lease", l.sc.leaseDuration().String(), "--wait", runWait.String(), "--holder", name, lockName,
		"--", l.bins.worker, "-once"}, l.workerArgs(r.slot, name)...)
	cmd := exec.Command(l.bins.s3lock, args...)
	cmd.Env = l.env(r.slot)
	return l.procs.start(name, r.slot, true, cmd, filepath.Join(l.logs, name+".log"))
}

// startSlots starts every slot's first process; each slot starts the next
// when one exits, until ctx ends.
func (l *lab) startSlots(ctx context.Context) {
	for _, w := range l.sc.workers {
		l.slots.Go(func() { l.slot(ctx, w.slot, 0, func(n int) (*proc, error) { return l.startWorker(w, n) }) })
	}
	for _, r := range l.sc.runners {
		l.slots.Go(func() {
			l.slot(ctx, r.slot, l.sc.runHangLimit(), func(n int) (*proc, error) { return l.startRunner(r, n) })
		})
	}
}

// slot keeps one process of a slot running until ctx ends. A process that
// outlives limit (0: no limit) is reported as hung and killed.
func (l *lab) slot(ctx context.Context, name string, limit time.Duration, start func(n int) (*proc, error)) {
	var hang <-chan time.Time
	for n := 1; ctx.Err() == nil; n++ {
		p, err := start(n)
		if errors.Is(err, errClosed) {
			return
		}
		if err != nil {
			l.t.Errorf("slot %s: %v", name, err)
			return
		}
		if limit > 0 {
			hang = time.After(limit)
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			return
		case <-hang:
			l.t.Errorf("process hung: %s ran for more than %s, an s3lock run's bound; killed it\n%s", p.name, limit, l.logTail(p.name))
			p.signal(syscall.SIGKILL)
			<-p.done
		}
		sleep(ctx, slotPause)
	}
}

// logTail returns the end of a process's output, for failure messages.
func (l *lab) logTail(name string) string {
	const tail = 2 << 10
	b, err := os.ReadFile(filepath.Join(l.logs, name+".log"))
	if err != nil {
		return ""
	}
	if len(b) > tail {
		b = b[len(b)-tail:]
	}
	return "    " + strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "\n    ")
}

// sleep waits for d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
