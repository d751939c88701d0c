// Command worker is the chaos suite's contender for the lock: a separate OS
// process that does read-modify-write critical sections on a register
// object in the store and records each step in its history file
// (chaos/internal/record).
//
// Modes:
//   - default: an SDK worker. It acquires the lock with package s3lock (its
//     clock skewed by -clock-offset and jumping every -clock-jump-every),
//     does one to -sections critical sections under each lease, releases
//     it, and starts over until SIGTERM.
//   - -once: the command of an `s3lock run`: one critical section under the
//     epoch in $S3LOCK_EPOCH, trusted for as long as the process lives
//     (`s3lock run` kills it before the lease could be taken over).
//   - -shared P: an SDK worker that takes a share of its leases shared
//     (s3lock.WithShared), with probability P; a shared lease's critical
//     sections read the register and never write it.
//   - -broken: a deliberately wrong worker for the suite's self-test: it
//     takes its lease without renewal, trusts it forever, outlives it
//     inside each critical section and writes the register unconditionally.
//   - -print-clock: print what time.Now says and exit (to show that
//     libfaketime does not reach Go programs).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/record"
	"github.com/s3lock/terraform-provider-s3lock/lab/chaos/internal/skewclock"
)

// exitFailed is the exit code of a worker that failed (it could not write
// its history, say): EX_SOFTWARE, which neither the worker's usage errors
// (2) nor `s3lock run`'s own codes use, so that the suite tells it from
// those when `s3lock run` passes it through.
const exitFailed = 70

// config is the worker's command line.
type config struct {
	endpoint, region, bucket string
	lock, register           string
	name, history            string
	lease                    time.Duration
	requestTimeout           time.Duration
	poll                     time.Duration
	work, idle               time.Duration
	sections                 int
	clockOffset              time.Duration
	jumpEvery, jumpBy        time.Duration
	once, broken, printClock bool
	seed                     uint64
	// shared is the share of leases taken shared (s3lock.WithShared):
	// their sections read the register and do not write it.
	shared float64
}

func parseFlags() config {
	var c config
	flag.StringVar(&c.endpoint, "endpoint", "", "S3 endpoint URL (the store, or a fault proxy in front of it)")
	flag.StringVar(&c.region, "region", "us-east-1", "region to sign requests for")
	flag.StringVar(&c.bucket, "bucket", "", "bucket of the lock and the register")
	flag.StringVar(&c.lock, "lock", "chaos/lock", "lock name")
	flag.StringVar(&c.register, "register", "chaos/register.json", "key of the register object")
	flag.StringVar(&c.name, "name", "", "this process's name: holder identity and history tag")
	flag.StringVar(&c.history, "history", "", "history file to create")
	flag.DurationVar(&c.lease, "lease", 3*time.Second, "lease duration")
	flag.DurationVar(&c.requestTimeout, "request-timeout", 2*time.Second, "bound of each S3 call of the lock client")
	flag.DurationVar(&c.poll, "poll", 100*time.Millisecond, "how often a waiting worker polls the holder's lease")
	flag.DurationVar(&c.work, "work", 500*time.Millisecond, "longest pause between reading and writing the register")
	flag.DurationVar(&c.idle, "idle", 300*time.Millisecond, "longest pause between two leases")
	flag.IntVar(&c.sections, "sections", 3, "most critical sections under one lease")
	flag.DurationVar(&c.clockOffset, "clock-offset", 0, "how far the lock client's wall clock is off")
	flag.DurationVar(&c.jumpEvery, "clock-jump-every", 0, "step the lock client's wall clock this often (0: never)")
	flag.DurationVar(&c.jumpBy, "clock-jump-by", 2*time.Hour, "size of each step, alternately forward and back")
	flag.BoolVar(&c.once, "once", false, "one critical section under $"+runenv.Epoch+" (the command of s3lock run)")
	flag.BoolVar(&c.broken, "broken", false, "trust the lease past its deadline and write unconditionally (self-test)")
	flag.BoolVar(&c.printClock, "print-clock", false, "print time.Now and exit")
	flag.Uint64Var(&c.seed, "seed", 0, "random seed (0: from the time)")
	flag.Float64Var(&c.shared, "shared", 0, "share of the leases taken shared, in [0, 1]: their sections only read the register")
	flag.Parse()
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	return c
}

func main() {
	c := parseFlags()
	if c.printClock {
		fmt.Println(time.Now().UTC().Format(time.RFC3339))
		return
	}
	if c.endpoint == "" || c.bucket == "" || c.name == "" || c.history == "" {
		fmt.Fprintln(os.Stderr, "worker: -endpoint, -bucket, -name and -history are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintf(os.Stderr, "worker %s: %v\n", c.name, err)
		os.Exit(exitFailed)
	}
}

func run(ctx context.Context, c config) error {
	rec, err := record.Create(c.history, c.name)
	if err != nil {
		return err
	}
	defer rec.Close()
	w := &worker{
		cfg: c,
		api: newS3(c),
		rec: rec,
		rng: rand.New(rand.NewPCG(c.seed, uint64(os.Getpid()))),
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("worker", c.name),
	}
	if c.once {
		return w.once(ctx)
	}
	clk, err := skewclock.New(c.clockOffset)
	if err != nil {
		return err
	}
	if err := w.rec.Write(record.Record{Kind: record.Start, Pid: os.Getpid(), Detail: "clock offset " + c.clockOffset.String()}); err != nil {
		return err
	}
	if c.jumpEvery > 0 {
		go w.jumpClock(ctx, clk)
	}
	if err := w.loop(ctx, clk); err != nil {
		return err
	}
	return w.rec.Write(record.Record{Kind: record.Exit, Detail: context.Cause(ctx).Error()})
}

// once is the command of an `s3lock run`: one critical section under the
// epoch s3lock acquired.
func (w *worker) once(ctx context.Context) error {
	lease, err := runenv.Read(os.Getenv)
	if err != nil {
		return fmt.Errorf("-once runs under s3lock run: %w", err)
	}
	epoch := lease.Epoch
	if err := w.rec.Write(record.Record{Kind: record.Start, Pid: os.Getpid(), Epoch: epoch}); err != nil {
		return err
	}
	// The command cannot see the lease: it counts as trusted while it
	// runs, which is what `s3lock run` promises (it kills the command
	// before anyone else could take the lock).
	trust := func() (int64, bool) { return 0, true }
	if w.cfg.broken {
		trust = func() (int64, bool) { return record.Forever, true }
	}
	if _, err := w.section(ctx, epoch, false, trust); err != nil {
		return err
	}
	detail := "done"
	if ctx.Err() != nil {
		detail = context.Cause(ctx).Error()
	}
	return w.rec.Write(record.Record{Kind: record.Exit, Detail: detail})
}

// jumpClock steps the lock client's wall clock every jumpEvery, forward and
// back by turns.
func (w *worker) jumpClock(ctx context.Context, clk *skewclock.Clock) {
	by := w.cfg.jumpBy
	t := time.NewTicker(w.cfg.jumpEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		clk.Jump(by)
		w.log.Info("clock jumped", "by", by, "offset", clk.Offset())
		if err := w.rec.Write(record.Record{Kind: record.ClockJump, Detail: by.String()}); err != nil {
			w.log.Error("recording a clock jump", "err", err)
		}
		by = -by
	}
}

// sleep waits for d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
