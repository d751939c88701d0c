// Package timeline records critical sections ("who held which epoch from
// when to when") from several processes into one file, and checks that they
// never overlapped. The demo and the end-to-end tests use it.
package timeline

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
)

// EnvFile names the environment variable that tells a guarded step where the
// timeline is.
const EnvFile = "S3LOCK_TIMELINE"

// RunStep is a guarded step: it holds "the protected resource" for hold and
// records that it did, under the epoch in $S3LOCK_EPOCH (set by `s3lock run`,
// or by a provisioner from the lease), as $S3LOCK_WHO, into $S3LOCK_TIMELINE.
func RunStep(hold time.Duration) error {
	who, path := os.Getenv("S3LOCK_WHO"), os.Getenv(EnvFile)
	epoch, err := strconv.ParseUint(os.Getenv(runenv.Epoch), 10, 64)
	if err != nil || who == "" || path == "" {
		return fmt.Errorf("timeline: a step needs S3LOCK_WHO, %s and %s in its environment (got %q, %q, %q)",
			runenv.Epoch, EnvFile, who, os.Getenv(runenv.Epoch), path)
	}
	start := time.Now()
	fmt.Printf("%s: running the guarded step under epoch %d\n", who, epoch)
	time.Sleep(hold)
	return Record(path, Section{Who: who, Epoch: epoch, Start: start, End: time.Now()})
}

// Section is one critical section.
type Section struct {
	Who        string
	Epoch      uint64
	Start, End time.Time
}

// Record appends s to the file at path as one line. Lines are written with a
// single append, so processes can share the file.
func Record(path string, s Section) error {
	if strings.ContainsAny(s.Who, " \n") || s.Who == "" {
		return fmt.Errorf("timeline: invalid name %q", s.Who)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("%s %d %d %d\n", s.Who, s.Epoch, s.Start.UnixNano(), s.End.UnixNano())
	if _, err := f.WriteString(line); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Read returns the sections recorded in path, ordered by start.
func Read(path string) ([]Section, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Section
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 {
			return nil, fmt.Errorf("timeline %s:%d: malformed line %q", path, n, sc.Text())
		}
		epoch, err1 := strconv.ParseUint(fields[1], 10, 64)
		start, err2 := strconv.ParseInt(fields[2], 10, 64)
		end, err3 := strconv.ParseInt(fields[3], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("timeline %s:%d: %w", path, n, err)
		}
		out = append(out, Section{Who: fields[0], Epoch: epoch, Start: time.Unix(0, start), End: time.Unix(0, end)})
	}
	slices.SortFunc(out, func(a, b Section) int { return a.Start.Compare(b.Start) })
	return out, sc.Err()
}

// Check returns an error describing every pair of consecutive sections that
// overlap in time, or whose epochs do not increase.
func Check(sections []Section) error {
	var errs []error
	for i := 1; i < len(sections); i++ {
		prev, cur := sections[i-1], sections[i]
		if cur.Start.Before(prev.End) {
			errs = append(errs, fmt.Errorf("OVERLAP: %s (epoch %d) started %s before %s (epoch %d) ended",
				cur.Who, cur.Epoch, prev.End.Sub(cur.Start).Round(time.Millisecond), prev.Who, prev.Epoch))
		}
		if cur.Epoch <= prev.Epoch {
			errs = append(errs, fmt.Errorf("EPOCH ORDER: %s ran under epoch %d after %s under epoch %d",
				cur.Who, cur.Epoch, prev.Who, prev.Epoch))
		}
	}
	return errors.Join(errs...)
}

// Render writes the sections as a timeline relative to origin. launched,
// when it has an entry for a participant, is when it was started, so the
// time it waited for the lock can be shown.
func Render(w io.Writer, sections []Section, origin time.Time, launched map[string]time.Time) {
	fmt.Fprintf(w, "%-10s %-12s %6s %9s %9s %9s\n", "t+", "who", "epoch", "held", "waited", "")
	for _, s := range sections {
		waited := "-"
		if l, ok := launched[s.Who]; ok {
			waited = s.Start.Sub(l).Round(10 * time.Millisecond).String()
		}
		held := s.End.Sub(s.Start)
		fmt.Fprintf(w, "%-10s %-12s %6d %9s %9s  %s\n",
			fmt.Sprintf("%.2fs", s.Start.Sub(origin).Seconds()), s.Who, s.Epoch,
			held.Round(10*time.Millisecond), waited, bar(s.Start.Sub(origin), held))
	}
}

// bar draws a section on a scale of one character per 250ms.
func bar(offset, length time.Duration) string {
	const unit = 250 * time.Millisecond
	return strings.Repeat(" ", int(offset/unit)) + strings.Repeat("█", max(1, int(length/unit)))
}

// StepMain, called first in a TestMain, makes the test binary the guarded
// step when env is set (tests run their own binary as the command a lock
// guards): it runs RunStep(hold) and exits. Otherwise it returns.
func StepMain(env string, hold time.Duration) {
	if os.Getenv(env) == "" {
		return
	}
	if err := RunStep(hold); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}
