package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/s3lock/terraform-provider-s3lock/internal/runenv"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfhttp"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
)

// backendRunExitCodes are backend run's exit codes.
const backendRunExitCodes = `Exit codes: COMMAND's exit code (128+N if it was killed by signal N), or
s3lock's own before COMMAND ran:
  1    error: the store is unreachable, refused the credentials, has no such bucket, ...
  2    usage: bad flags, arguments or configuration
  126  COMMAND could not be started; 127: it was not found`

// envWorkspace is Terraform's own variable for the workspace: the default
// of --workspace, and not passed on (the http backend has no workspaces).
const envWorkspace = "TF_WORKSPACE"

const backendRunLong = `Run COMMAND (terraform, tofu, terragrunt, or a script that runs them) with
Terraform's http backend served by s3lock on 127.0.0.1 for as long as COMMAND
runs, for the state at --key in --bucket. The configuration says only

  terraform {
    backend "http" {}
  }

COMMAND's environment gets TF_HTTP_ADDRESS, TF_HTTP_LOCK_ADDRESS and
TF_HTTP_UNLOCK_ADDRESS (the state's URL), the methods, and TF_HTTP_USERNAME and
TF_HTTP_PASSWORD, drawn at random for this run: no other process on the host
can use the endpoint. TF_WORKSPACE is taken as --workspace and not passed on.

The state object is the one Terraform's s3 backend uses for the same bucket,
key and workspace (env:/WORKSPACE/KEY for a workspace other than default), and
its lock is the s3lock lock KEY.s3lock, the one the s3lock_s3 state store
takes: the three can share a state. While a run other than a plan holds the
lock it also holds the s3 backend's lock file KEY.tflock, so plain runs with
use_lockfile = true wait for it, and it waits for them.

The lock: plans (Terraform's lock operation OperationTypePlan: plan, with or
without -out) share it, and write nothing (a state write under a plan's lock
is refused); every other operation holds it alone, waits for the plans that
hold it, and keeps new plans out meanwhile. A lock request waits up to --wait
in the lock's line (--order), printing who holds it; when the wait ends
Terraform reports the state locked, under the holder's lock ID (the lease's
epoch; a plan's is EPOCH.SHARE) — 'terraform force-unlock ID' frees it,
through 'backend run' (a plan's ID ends that plan's lock only). The lease renews while COMMAND runs. When
COMMAND exits (or is killed) holding the lock, s3lock releases it at once; if
s3lock itself dies, COMMAND gets SIGTERM once (Terraform's graceful stop: it
keeps what it could not write in errored.tfstate) and the lock lapses after
--lease. (In the foreground of a terminal, Linux may deliver that SIGTERM more
than once as s3lock's threads exit, and Terraform then stops at once.)
If the lease is lost (force-unlocked, or the store unreachable past the lease)
COMMAND gets SIGINT, Terraform's graceful stop.

Fenced writes: every state write under the lock lands only while its lease is
the lock's newest; a write of a run that was paused past its lease or
force-unlocked is refused (Terraform then saves the state in
errored.tfstate). A write without the lock (-lock=false) is refused while
anyone holds the lock.

Signals: SIGINT, SIGTERM and SIGHUP are forwarded to COMMAND as 's3lock run'
forwards them, and end a lock request that waits.

` + backendRunExitCodes

func (a *app) backendRunCommand() *cobra.Command {
	var bf backendFlags
	var key, workspace, prefix string
	cmd := &cobra.Command{
		Use:   "run --key KEY [flags] -- COMMAND [ARGS...]",
		Short: "Run terraform or tofu with an http backend served from the bucket",
		Long:  backendRunLong,
		Example: `  s3lock backend run --bucket my-states --key app/terraform.tfstate -- terraform apply -auto-approve
  S3LOCK_BUCKET=my-states s3lock backend run --key app/terraform.tfstate --workspace prod -- tofu plan
  s3lock backend run --bucket my-states --key app/terraform.tfstate -- terraform force-unlock 17`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch dash := cmd.ArgsLenAtDash(); {
			case len(args) == 0:
				return usagef("missing the command: s3lock backend run --key KEY -- COMMAND [ARGS...]")
			case dash < 0:
				return usagef("missing '--' before the command: s3lock backend run --key KEY -- COMMAND [ARGS...]")
			case dash > 0:
				return usagef("unexpected arguments before '--': %q (the state is --key KEY)", args[:dash])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("workspace") {
				if v := os.Getenv(envWorkspace); v != "" {
					workspace = v
				}
			}
			return a.backendRun(cmd.Context(), bf, key, workspace, prefix, args)
		},
	}
	bf.register(cmd)
	cmd.Flags().StringVar(&key, "key", "", "the state's key in the bucket, as the s3 backend's key, e.g. app/terraform.tfstate (required)")
	cmd.Flags().StringVar(&workspace, "workspace", tfstate.DefaultWorkspace, "the workspace whose state COMMAND uses (env "+envWorkspace+")")
	cmd.Flags().StringVar(&prefix, "workspace-key-prefix", tfstate.DefaultWorkspaceKeyPrefix,
		"where the states of workspaces other than default are: PREFIX/WORKSPACE/KEY, as the s3 backend's workspace_key_prefix")
	return cmd
}

func (a *app) backendRun(ctx context.Context, bf backendFlags, key, workspace, prefix string, argv []string) error {
	if err := a.needBucket(); err != nil {
		return err
	}
	if key == "" {
		return usagef("no --key: give the state's key in the bucket, e.g. --key app/terraform.tfstate")
	}
	object, err := stateObjectKey(key, workspace, prefix)
	if err != nil {
		return err
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return exitWith(cannotRunCode(err), fmt.Errorf("cannot run %s: %w", argv[0], err))
	}
	cfg, err := a.backendConfig(ctx, bf)
	if err != nil {
		return err
	}
	creds := tfhttp.RandomCredentials()
	cfg.Key, cfg.Credentials, cfg.ForceUnlockID = object, creds, forceUnlockID(argv)
	srv, err := tfhttp.New(cfg)
	if err != nil {
		return err
	}
	if err := checkStore(ctx, cfg, object); err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("cannot serve the http backend on 127.0.0.1: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	code, runErr := a.runWithBackend(srv, argv, tfhttp.Environ("http://"+l.Addr().String(), object, creds))
	shutdownCtx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		fmt.Fprintf(a.stderr, "s3lock backend: warning: %s; a lock not released lapses by itself within %s\n", oneLine(err.Error()), bf.lease)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(a.stderr, "s3lock backend: warning: the http backend stopped: %v\n", err)
	}
	if runErr != nil {
		return runErr
	}
	if code == 0 && !srv.Served() && usesState(argv) {
		fmt.Fprintf(a.stderr, "s3lock backend: note: %s made no request to the backend, so s3://%s/%s was neither read nor written: "+
			"does the configuration say terraform { backend \"http\" {} }?\n", argv[0], a.bucket, object)
	}
	if code != 0 {
		return exitWith(code, nil)
	}
	return nil
}

// runWithBackend runs the command with env added to its environment (and
// TF_WORKSPACE and any other TF_HTTP_* settings of ours removed), forwards
// s3lock's signals to it (ending the server's lock waits), stops it
// gracefully if a lock it holds is lost, and returns its exit code.
func (a *app) runWithBackend(srv *tfhttp.Server, argv, env []string) (int, error) {
	child, err := newBackendChild(argv, env)
	if err != nil {
		return 0, err
	}
	forward := make(chan os.Signal, 4)
	a.setSignalHandler(func(sig os.Signal) {
		srv.Interrupt()
		select {
		case forward <- sig:
		default:
		}
	})
	defer a.setSignalHandler(nil)
	if err := child.cmd.Start(); err != nil {
		return 0, exitWith(cannotRunCode(err), fmt.Errorf("cannot run %s: %w", argv[0], err))
	}
	srv.OnLost(func(state string, err error) {
		fmt.Fprintf(a.stderr, "s3lock backend: the state lock of s3://%s/%s was lost (%s): stopping %s (SIGINT) — its state writes are refused\n",
			a.bucket, state, oneLine(err.Error()), argv[0])
		_ = signalChild(child.cmd.Process, syscall.SIGINT, !child.fg)
	})
	return a.awaitBackendChild(child, forward), nil
}

// backendChild is backend run's command, started directly or through the
// relay.
type backendChild struct {
	cmd   *exec.Cmd // the command's process, or the relay's
	name  string    // the command's argv[0], for messages
	fg    bool      // in the foreground of a terminal: no process group of its own
	relay bool      // started through the relay (relayed)
}

// newBackendChild prepares the command argv, through the relay outside an
// interactive terminal, with env added to s3lock's environment less
// TF_WORKSPACE, our TF_HTTP_* settings and what runenv withholds.
func newBackendChild(argv, env []string) (*backendChild, error) {
	fg := foregroundOfTerminal()
	line, relay := argv, relayed(fg)
	env = append(runenv.Without(os.Environ(), slices.Concat(tfhttp.Names(), []string{envWorkspace}, runenv.Withheld())...), env...)
	if relay {
		var relayEnv string
		var err error
		if line, relayEnv, err = relayCommand(argv); err != nil {
			return nil, err
		}
		env = append(env, relayEnv)
	}
	cmd := exec.Command(line[0], line[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = env
	configureChild(cmd, fg, relay) // the relay gets the watchdog's death signal
	if !relay {
		setGracefulDeathSignal(cmd.SysProcAttr)
	}
	return &backendChild{cmd: cmd, name: argv[0], fg: fg, relay: relay}, nil
}

// awaitBackendChild waits for the started command to exit, forwarding it the
// signals of forward, and returns its exit code. Behind the relay, what the
// command left in its process group is killed first (killLeftovers).
func (a *app) awaitBackendChild(child *backendChild, forward <-chan os.Signal) int {
	exited := make(chan struct{})
	var waitErr error // the command's, once exited is closed (without the relay)
	go func() {
		// The relay stays unreaped until what the command left in its
		// process group is killed: its pid keeps the group's id ours.
		if child.relay {
			awaitExit(child.cmd.Process.Pid)
		} else {
			waitErr = child.cmd.Wait()
		}
		close(exited)
	}()
	for {
		select {
		case <-exited:
			if child.relay {
				a.killLeftovers(child.cmd.Process.Pid, child.name)
				err := child.cmd.Wait()
				return childExitCode(child.cmd.ProcessState, err)
			}
			return childExitCode(child.cmd.ProcessState, waitErr)
		case sig := <-forward:
			if child.fg && sig != syscall.SIGTERM {
				continue // the terminal sent it to the command too
			}
			_ = signalChild(child.cmd.Process, sig, !child.fg)
		}
	}
}

// killLeftovers kills what the command left running in its process group
// (pgid), before the locks it may have taken are released: a SIGKILLed
// terragrunt's terraform children, say, must not go on applying while the
// next run holds the state.
func (a *app) killLeftovers(pgid int, command string) {
	if !groupRunning(pgid) {
		return
	}
	fmt.Fprintf(a.stderr, "s3lock backend: %s exited but left processes running in its process group %d; killing them before releasing the state's lock\n",
		command, pgid)
	if !killGroup(pgid, groupKillLimit) {
		fmt.Fprintf(a.stderr, "s3lock backend: warning: processes of the group %d survived SIGKILL for %s\n", pgid, groupKillLimit)
	}
}

// stateCommands are Terraform's commands that read or write the state: a
// run of one that never reached the backend used another backend.
var stateCommands = []string{"plan", "apply", "destroy", "refresh", "import", "output", "show", "state"}

// usesState reports whether a command line runs one of stateCommands.
func usesState(argv []string) bool {
	return slices.ContainsFunc(argv[1:], func(arg string) bool { return slices.Contains(stateCommands, arg) })
}

// forceUnlockID is the lock ID of a `terraform force-unlock ID` (or tofu's,
// or terragrunt's) command line: Terraform's and OpenTofu's http backend do
// not send it with the unlock request, so the server takes it from here.
// "" for any other command.
func forceUnlockID(argv []string) string {
	seen := false
	for _, arg := range argv[1:] {
		switch {
		case arg == "force-unlock":
			seen = true
		case seen && !strings.HasPrefix(arg, "-"):
			return arg
		}
	}
	return ""
}
