// Command bench is the comparison half of `make bench`. On one local
// versitygw server it measures, in one run:
//
//   - how soon a waiting s3lock Acquire holds a lock after the holder
//     releases it, and after the holder crashes, against two real
//     `terraform apply` runs of one state in an S3 backend with Terraform's
//     native lock (use_lockfile), and how many requests each waiter spends;
//   - how s3lock scales: many waiters on one lock, 10,000 locks under a
//     prefix, acquisitions per second on one contended lock;
//   - what it costs at AWS S3 Standard list prices, from the request counts
//     it measured;
//   - the handoffs, the takeover after a crash and slot acquisition again
//     under latency profiles of AWS S3 Standard and S3 Express One Zone
//     (lab/internal/latency): every request delayed as such a store would
//     answer it.
//
// It writes a Markdown report (docs/benchmarks.md by default) and a chart
// of handoff time against hold time next to it. Every request is counted on
// the wire: each participant talks to the store through a recording proxy
// on loopback (tap.go), which also injects the profile's delays, or a
// recording HTTP client (record.go).
//
// `bench holder` is the s3lock holder process that the handoff measurements
// start, release and SIGKILL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/lab/internal/latency"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// config is what the flags set.
type config struct {
	out          string          // the Markdown report; the chart goes next to it
	holds        []time.Duration // hold times of the handoff measurements
	reps         int             // runs per hold time
	crashHold    time.Duration   // how long a holder holds before it is killed
	crashLease   time.Duration   // the s3lock lease of the crash measurement
	tfCrashWait  time.Duration   // how long terraform's waiter waits after the crash
	waiters      []int           // waiter counts of the scale measurement
	waitersFor   time.Duration   // how long each waiter count runs
	waitersHold  time.Duration   // how long each holder holds in it
	locks        int             // locks under one prefix for List
	setupWorkers int             // concurrent creators of those locks
	contenders   int             // handles acquiring and releasing one lock in a loop
	contendFor   time.Duration   // how long they do
	terraform    bool            // run the Terraform measurements
	prices       prices
	profiles     []*latency.Profile // the latency profiles to measure under
	seed         uint64             // seeds every draw of the profiles' delays and the series' schedules
	profileReps  int                // runs per hold time under a profile with delays
	series       int                // s3lock handoffs of the series, per profile
	seriesPairs  int                // pairs of handles that run the series at once
	slots        int                // n of the slot acquisition measurement
	slotRounds   int                // times it fills the lock and finds it full
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if len(os.Args) > 1 && os.Args[1] == "holder" {
		err = runHolder(ctx, os.Args[2:])
	} else {
		err = runBench(ctx, os.Args[1:])
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func runBench(ctx context.Context, args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	if dir := filepath.Dir(cfg.out); !isDir(dir) {
		return fmt.Errorf("-out %s: there is no directory %s to write the report in", cfg.out, dir)
	}
	start := time.Now()
	res, err := measure(ctx, cfg)
	if err != nil {
		return err
	}
	res.wall = time.Since(start)
	chart := strings.TrimSuffix(cfg.out, filepath.Ext(cfg.out)) + "-handoff.png"
	if res.loopbackResult() != nil {
		if err := drawHandoffChart(chart, cfg.holds, res.release); err != nil {
			return err
		}
		logf("%s", strings.ReplaceAll(verdict(cfg.holds, res.release), "**", ""))
	}
	if err := os.WriteFile(cfg.out, []byte(report(cfg, res, filepath.Base(chart))), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", cfg.out, err)
	}
	logf("wrote %s in %s", cfg.out, res.wall.Round(time.Second))
	for _, pr := range res.profiles {
		logf("%s", strings.ReplaceAll(goalVerdict(pr), "**", ""))
	}
	return nil
}

func parseFlags(args []string) (config, error) {
	cfg := config{
		holds:  []time.Duration{2 * time.Second, 6 * time.Second, 20 * time.Second},
		prices: listPrices,
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&cfg.out, "out", "docs/benchmarks.md", "the Markdown report to write; the chart is written next to it as NAME-handoff.png")
	fs.Func("holds", "comma-separated hold times of the handoff measurements (default 2s,6s,20s)", durationList(&cfg.holds))
	fs.IntVar(&cfg.reps, "reps", 2, "runs per hold time, for s3lock and for terraform")
	fs.DurationVar(&cfg.crashHold, "crash-hold", 6*time.Second, "how long a holder holds the lock before it is SIGKILLed")
	fs.DurationVar(&cfg.crashLease, "crash-lease", 10*time.Second, "s3lock lease duration of the crash measurement (renewed every third)")
	fs.DurationVar(&cfg.tfCrashWait, "tf-crash-wait", 15*time.Second, "how long terraform's waiter keeps waiting after the crash (its -lock-timeout is crash-hold plus this)")
	cfg.waiters = []int{1, 10, 50}
	fs.Func("waiters", "comma-separated waiter counts on one lock (default 1,10,50)", intList(&cfg.waiters))
	fs.DurationVar(&cfg.waitersFor, "waiters-for", 10*time.Second, "how long each waiter count runs")
	fs.DurationVar(&cfg.waitersHold, "waiters-hold", 300*time.Millisecond, "how long each holder holds the lock in the waiters measurement")
	fs.IntVar(&cfg.locks, "locks", 10_000, "locks under one prefix for the List measurement")
	fs.IntVar(&cfg.setupWorkers, "setup-workers", 64, "concurrent creators of those locks")
	fs.IntVar(&cfg.contenders, "contenders", 8, "handles acquiring and releasing one lock in a loop")
	fs.DurationVar(&cfg.contendFor, "contend-for", 10*time.Second, "how long they do")
	fs.BoolVar(&cfg.terraform, "terraform", true, "run the Terraform measurements (false: s3lock only)")
	cfg.profiles = latency.Profiles
	fs.Func("profiles", "comma-separated latency profiles to measure under: "+strings.Join(latency.Names(), ", ")+" (default all)",
		func(s string) (err error) { cfg.profiles, err = latency.Parse(s); return err })
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the profiles' delays and of the series' holds and arrivals: the same seed draws the same delays")
	fs.IntVar(&cfg.profileReps, "profile-reps", 1, "runs per hold time under the profiles with delays, for s3lock and for terraform (loopback: -reps)")
	fs.IntVar(&cfg.series, "series", 200, "s3lock handoffs of the handoff series under each profile (0: none)")
	fs.IntVar(&cfg.seriesPairs, "series-pairs", 4, "pairs of handles that run the series at once, each on a lock of its own")
	fs.IntVar(&cfg.slots, "slots", 8, "slots of the slot acquisition measurement (s3lock.Slots)")
	fs.IntVar(&cfg.slotRounds, "slot-rounds", 3, "times the slot measurement fills the lock and tries it full (0: none)")
	fs.Float64Var(&cfg.prices.write, "price-put", listPrices.write, "USD per 1,000 PUT, COPY, POST and LIST requests")
	fs.Float64Var(&cfg.prices.read, "price-get", listPrices.read, "USD per 1,000 GET and other requests")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	return cfg, cfg.validate()
}

func (c config) validate() error {
	switch {
	case len(c.holds) == 0 || len(c.waiters) == 0:
		return errors.New("-holds and -waiters need at least one value")
	case c.reps < 1 || c.locks < 1 || c.setupWorkers < 1 || c.contenders < 2:
		return errors.New("-reps, -locks and -setup-workers must be at least 1, -contenders at least 2")
	case c.profileReps < 1 || c.seriesPairs < 1 || c.series < 0 || c.slotRounds < 0:
		return errors.New("-profile-reps and -series-pairs must be at least 1, -series and -slot-rounds at least 0")
	case c.slots < 2 || c.slots > s3lock.MaxSlots:
		return fmt.Errorf("-slots %d is out of range: a slot lock has 2 to %d slots", c.slots, s3lock.MaxSlots)
	case c.crashHold <= c.crashLease/3:
		// The renewal cost is read off the crashed holder's renewals.
		return fmt.Errorf("-crash-hold %s must exceed a third of -crash-lease %s, so that the holder renews before it is killed", c.crashHold, c.crashLease)
	}
	for _, h := range c.holds {
		if h < time.Second || h%time.Second != 0 {
			return fmt.Errorf("hold time %s is not a whole number of seconds (terraform's provisioner runs sleep)", h)
		}
	}
	return nil
}

func durationList(dst *[]time.Duration) func(string) error {
	return func(s string) error {
		var out []time.Duration
		for _, f := range strings.Split(s, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		*dst = out
		return nil
	}
}

func intList(dst *[]int) func(string) error {
	return func(s string) error {
		var out []int
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("%q is not a positive integer", f)
			}
			out = append(out, n)
		}
		*dst = out
		return nil
	}
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// logf reports progress on stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}
