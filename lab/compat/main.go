// Command compat runs s3lock on the S3-compatible stores it can start here
// (internal/s3server: versitygw, MinIO, SeaweedFS, s3rver) and writes the
// store compatibility page, docs/compatibility.md.
//
//	go -C lab run ./compat probe [-stores versitygw,minio,s3rver] [-writers 8] [-rounds 100]
//	go -C lab run ./compat suite -store minio [-runs 2] [-run REGEXP]
//	go -C lab run ./compat render
//
// probe (make compat) starts each store fresh and measures it: the SDK's
// storecheck.Verify, `s3lock verify`, the quirks in which stores differ from AWS S3,
// races of concurrent conditional writes and median latencies. suite (make
// test-stores) runs the SDK's test suite under the race detector on one
// shared bucket of the store, twice, checks that nothing was left outside
// the tests' prefixes, runs `s3lock verify` and the benchmarks. Both record
// what they found in compat/results.json and render the page from it and
// compat/known.json (the stores that cannot be run here, with sources);
// render only renders. A test (TestCompatibilityPage_UpToDate) fails if the
// committed page is not what render makes of the committed files.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
)

// The files of the page, relative to the repository's root.
const (
	resultsFile = "lab/compat/results.json"
	knownFile   = "lab/compat/known.json"
	pageFile    = "docs/compatibility.md"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		os.Exit(1)
	}
}

const usage = "usage: go -C lab run ./compat probe|suite|render [flags] (-h for each)"

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	if err := chdirRoot(); err != nil {
		return err
	}
	switch args[0] {
	case "probe":
		return probeCommand(ctx, args[1:])
	case "suite":
		return suiteCommand(ctx, args[1:])
	case "render":
		fs := flag.NewFlagSet("render", flag.ContinueOnError)
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return renderFiles()
	}
	return fmt.Errorf("unknown command %q; %s", args[0], usage)
}

// chdirRoot moves to the repository's root (where the main module's go.mod
// is, above lab/compat), so that the files and `go test ./s3lock/` resolve
// wherever make or go run started.
func chdirRoot() error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "lab", "compat")); err == nil {
				return os.Chdir(dir)
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return errors.New("run it inside the s3lock repository (no go.mod with a lab/compat/ directory above the working directory)")
		}
		dir = parent
	}
}

func probeCommand(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	stores := fs.String("stores", "versitygw,minio,s3rver", "the stores to probe, comma-separated ("+kindNames()+")")
	writers := fs.Int("writers", 8, "concurrent requests per race round")
	rounds := fs.Int("rounds", 100, "rounds per race")
	samples := fs.Int("samples", 200, "requests per latency median")
	if err := fs.Parse(args); err != nil {
		return err
	}
	kinds, err := parseKinds(*stores)
	if err != nil {
		return err
	}
	if *writers < 2 || *rounds < 1 || *samples < 1 {
		return errors.New("probe: -writers must be at least 2, -rounds and -samples at least 1")
	}
	cli, cleanup, err := buildCLI(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	for _, kind := range kinds {
		fmt.Printf("=== probing %s\n", kind)
		st, err := s3server.StartStore(ctx, kind, s3server.StoreOptions{})
		if err != nil {
			return err
		}
		p, err := newProber(ctx, st, cli, *writers)
		var probe *Probe
		if err == nil {
			probe, err = p.probe(ctx, *writers, *rounds, *samples)
		}
		st.Stop()
		_ = os.RemoveAll(st.DataDir())
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		printProbe(kind, probe)
		err = updateResults(resultsFile, func(r *Results) { r.store(string(kind), st.Version()).Probe = probe })
		if err != nil {
			return err
		}
	}
	return renderFiles()
}

func printProbe(kind s3server.Kind, p *Probe) {
	fmt.Printf("%s: Verify: %s\n%s: s3lock verify: exit %d %s\n", kind, p.Verify, kind, p.CLIVerify.Exit, p.CLIVerify.Line)
	for _, r := range p.Races {
		fmt.Printf("%s: %s, %d writers x %d rounds: one winner %d, several %d, none %d, errors %d\n",
			kind, r.Name, p.Writers, p.Rounds, r.OneWinner, r.Several, r.None, r.Errors)
	}
	fmt.Printf("%s: median create %.2f ms, CAS %.2f ms, GET %.2f ms\n", kind, p.Latency.CreateMs, p.Latency.CASMs, p.Latency.GetMs)
	for _, q := range p.Quirks {
		fmt.Printf("%s: %s: %s\n", kind, q.Check, q.Answer)
	}
}

// storeOrder is the position of a store on the page: the order of
// s3server.Kinds.
func storeOrder(kind string) int {
	if i := slices.Index(s3server.Kinds(), s3server.Kind(kind)); i >= 0 {
		return i
	}
	return len(s3server.Kinds())
}

func kindNames() string {
	var names []string
	for _, k := range s3server.Kinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

func parseKinds(list string) ([]s3server.Kind, error) {
	var kinds []s3server.Kind
	for name := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(name) == "" {
			continue
		}
		k, err := s3server.ParseKind(name)
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, k)
	}
	if len(kinds) == 0 {
		return nil, errors.New("no store given")
	}
	return kinds, nil
}
