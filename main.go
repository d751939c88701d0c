// Command terraform-provider-s3lock serves the s3lock Terraform provider.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/s3lock/terraform-provider-s3lock/internal/buildinfo"
	"github.com/s3lock/terraform-provider-s3lock/internal/provider"
	"github.com/s3lock/terraform-provider-s3lock/internal/runguard"
)

// version is what a release build links in (make release: -X
// main.version=v0.1.0); without it the provider reports the module version
// Go recorded (buildinfo.Version).
var version string

const (
	// cleanupTimeout bounds the release of leases left open when the server
	// stops: Terraform kills a provider that has not exited two seconds
	// after it asked it to stop.
	cleanupTimeout = 1500 * time.Millisecond
	// orphanPoll is how often a provider process checks that terraform,
	// its parent, is still there.
	orphanPoll = 200 * time.Millisecond
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == runguard.GuardArg {
		os.Exit(runguard.Serve(os.Args[2:]))
	}
	var debug, showVersion bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.BoolVar(&showVersion, "version", false, "print the provider's version and exit")
	flag.Parse()
	if showVersion {
		fmt.Println("terraform-provider-s3lock", buildinfo.Version(version))
		return
	}

	provider.HandleInterrupts()
	run, whyNot := runClient(debug)
	factory, cleanup := provider.NewForRun(buildinfo.Version(version), run, whyNot)
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
// OpenTofu) started this process on a system where the guard can follow
// it, so that ephemeral leases can be held for the whole run; otherwise nil
// and why not (a debugger, a test harness, S3LOCK_RUN_GUARD=off, Windows):
// an ephemeral lease that asks for the whole run then fails with that
// reason. It also makes the process notice when terraform dies before
// shutting it down (SIGKILL): it tells the guard, so the run's leases lapse
// rather than being released while what the run started may still be going
// on, and exits.
func runClient(debug bool) (*runguard.Client, error) {
	r, err := runguard.ForProvider(debug)
	if err != nil {
		log.Printf("[INFO] ephemeral leases cannot be held for the whole run: %v", err)
		return nil, err
	}
	// With terraform gone, a write to its stderr pipe would kill this
	// process before it can tell the guard.
	signal.Ignore(syscall.SIGPIPE)
	run := runguard.NewClient(r)
	parent := r.PID
	go func() {
		for os.Getppid() == parent {
			time.Sleep(orphanPoll)
		}
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		_ = run.Orphaned(ctx)
		os.Exit(1)
	}()
	return run, nil
}
