package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// app is one invocation of the tool.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	// Connection flags (persistent on the root command).
	bucket      string
	endpoint    string
	pathStyle   bool
	region      string
	profile     string
	bucketOwner string
	objects     awsclient.ObjectSettings // encryption and ACL of the objects written
	debug       bool
	statsOn     bool

	// conn holds the other connection flags (TLS, proxies, STS, retries,
	// the S3 backend's skip_* switches, see connection.go); assumeRole and
	// webIdentity the role flags, used when useAssumeRole or useWebIdentity
	// says one of them (or its variable) is set.
	conn                          awsclient.Options
	assumeRole                    awsclient.AssumeRole
	webIdentity                   awsclient.WebIdentity
	useAssumeRole, useWebIdentity bool

	stats *stats // --stats: counts what the client does; nil without

	ran bool // a command's RunE started: its errors are not usage errors

	sigMu    sync.Mutex
	onSignal func(os.Signal) // nil: cancel the command's context
	cancel   context.CancelCauseFunc
	signals  chan os.Signal
	stopTrap chan struct{}
	trapWG   sync.WaitGroup
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{stdin: stdin, stdout: stdout, stderr: stderr}
}

// execute runs the command line args and returns the exit code.
func (a *app) execute(args []string) int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	a.cancel = cancel
	a.trapSignals()
	defer a.untrapSignals()

	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	// The summary comes before the error, which stays the last line.
	a.printStats()
	if err == nil {
		return exitOK
	}
	code, hint := classify(ctx, err)
	if !a.ran {
		// Cobra's own errors: unknown command or flag, bad flag value.
		var ee *exitErr
		if !errors.As(err, &ee) {
			code, hint = exitUsage, true
		}
	}
	var ee *exitErr
	if errors.As(err, &ee) && ee.err == nil {
		return code // the message was printed already
	}
	if cmd == nil {
		cmd = root
	}
	msg := cmd.CommandPath() + ": " + strings.TrimPrefix(oneLine(err.Error()), "s3lock: ")
	switch {
	case errors.Is(err, s3lock.ErrInvalidName):
		msg += " (" + nameRules + ")"
	case hint:
		msg += " (see '" + cmd.CommandPath() + " --help')"
	}
	fmt.Fprintln(a.stderr, msg)
	return code
}

// printStats prints the --stats summary, if asked for.
func (a *app) printStats() {
	if a.stats != nil {
		a.stats.print(a.stderr, time.Now())
	}
}

// trapSignals routes SIGINT, SIGTERM and SIGHUP to the current handler: by
// default they cancel the command's context; `s3lock run` forwards them to
// its command while that runs.
func (a *app) trapSignals() {
	a.signals = make(chan os.Signal, 4)
	a.stopTrap = make(chan struct{})
	signal.Notify(a.signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	a.trapWG.Add(1)
	go func() {
		defer a.trapWG.Done()
		for {
			select {
			case <-a.stopTrap:
				return
			case sig := <-a.signals:
				a.sigMu.Lock()
				h := a.onSignal
				a.sigMu.Unlock()
				if h != nil {
					h(sig)
				} else {
					a.cancel(signalErr{sig})
				}
			}
		}
	}()
}

// untrapSignals stops the router. The signals stay caught (and are now
// dropped) until the process exits, so one that arrives while s3lock exits
// cannot replace the exit code it is about to return.
func (a *app) untrapSignals() {
	close(a.stopTrap)
	a.trapWG.Wait()
}

// setSignalHandler makes h receive the signals (nil: cancel the context).
func (a *app) setSignalHandler(h func(os.Signal)) {
	a.sigMu.Lock()
	a.onSignal = h
	a.sigMu.Unlock()
}
