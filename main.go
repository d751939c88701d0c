// Command terraform-provider-s3lock serves the s3lock Terraform provider.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/s3lock/terraform-provider-s3lock/internal/provider"
	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
)

// version is set by goreleaser at build time.
var version = "dev"

const (
	// cleanupTimeout bounds the release of leases left open when the server
	// stops: Terraform kills a provider that has not exited two seconds
	// after it asked it to stop.
	cleanupTimeout = 1500 * time.Millisecond
	// orphanPoll is how often a provider process checks that terraform,
	// its parent, is still there.
	orphanPoll = 200 * time.Millisecond
)

// magicCookieKey is the variable Terraform and OpenTofu set for the provider
// processes they start (the plugin handshake).
const magicCookieKey = "TF_PLUGIN_MAGIC_COOKIE"

// runGuardEnv turns the run guard off ("off"): each phase takes the lock.
const runGuardEnv = "S3LOCK_RUN_GUARD"

func main() {
	if len(os.Args) > 1 && os.Args[1] == runguard.GuardArg {
		os.Exit(runguard.Serve(os.Args[2:]))
	}
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	run := runClient(debug)
	factory, cleanup := provider.NewForRun(version, run)
	err := providerserver.Serve(context.Background(), factory, providerserver.ServeOpts{
		Address: "registry.terraform.io/s3lock/s3lock",
		Debug:   debug,
	})

	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	if run != nil {
		// Terraform shut this phase's provider down cleanly: the run's
		// guard keeps the leases until terraform exits.
		if berr := run.Bye(ctx); berr != nil {
			log.Printf("[WARN] %v", berr)
		}
	}
	// Terraform closes the ephemeral leases it opened, except when the run
	// failed or was interrupted: release those now rather than leave them
	// to lapse (per-phase leases only; the run guard's are its own).
	released, cerr := cleanup(ctx)
	for _, t := range released {
		log.Printf("[WARN] released lock %q in bucket %s (epoch %d), which Terraform left open", t.Name, t.Bucket, t.Epoch)
	}
	if cerr != nil {
		log.Printf("[ERROR] could not release the locks Terraform left open; they lapse after their lease_duration: %v", cerr)
	}
	cancel()
	if err != nil {
		log.Fatal(err)
	}
}

// runClient returns the client of this run's guard when Terraform (or
// OpenTofu) started this process and the system can tell runs apart (Linux),
// so that ephemeral leases are held for the whole run; nil otherwise (tests,
// a debugger, other systems, S3LOCK_RUN_GUARD=off, a terraform that is the
// init process of its container): a lease per phase. It also makes the
// process notice when terraform dies before shutting it down (SIGKILL): it
// tells the guard, so the run's leases lapse rather than being released
// while what the run started may still be going on, and exits.
func runClient(debug bool) *runguard.Client {
	if debug || os.Getenv(magicCookieKey) == "" {
		return nil
	}
	if v := os.Getenv(runGuardEnv); v == "off" || v == "0" || v == "false" {
		log.Printf("[INFO] %s=%s: ephemeral leases are held per phase, not per run", runGuardEnv, v)
		return nil
	}
	parent := os.Getppid()
	r, err := runguard.Parent()
	if err == nil && r.PID == 1 {
		// The kernel kills the whole container, guard included, the
		// moment its init exits: the guard could not release.
		err = errors.New("terraform is the init process (pid 1) of its container")
	}
	if err == nil {
		err = runguard.Usable()
	}
	if err != nil {
		log.Printf("[WARN] ephemeral leases are held per phase, not per run: %v", err)
		return nil
	}
	// With terraform gone, a write to its stderr pipe would kill this
	// process before it can tell the guard.
	signal.Ignore(syscall.SIGPIPE)
	run := runguard.NewClient(r)
	go func() {
		for os.Getppid() == parent {
			time.Sleep(orphanPoll)
		}
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		_ = run.Orphaned(ctx)
		os.Exit(1)
	}()
	return run
}
