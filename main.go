// Command terraform-provider-s3lock serves the s3lock Terraform provider.
package main

import (
	"context"
	"flag"
	"log"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/s3lock/terraform-provider-s3lock/internal/provider"
)

// version is set by goreleaser at build time.
var version = "dev"

// cleanupTimeout bounds the release of leases left open when the server
// stops: Terraform kills a provider that has not exited two seconds after it
// asked it to stop.
const cleanupTimeout = 1500 * time.Millisecond

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	factory, cleanup := provider.NewWithCleanup(version)
	err := providerserver.Serve(context.Background(), factory, providerserver.ServeOpts{
		Address: "registry.terraform.io/s3lock/s3lock",
		Debug:   debug,
	})

	// Terraform closes the ephemeral leases it opened, except when the run
	// failed or was interrupted: release those now rather than leave them
	// to lapse.
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	released, cerr := cleanup(ctx)
	cancel()
	for _, t := range released {
		log.Printf("[WARN] released lock %q in bucket %s (epoch %d), which Terraform left open", t.Name, t.Bucket, t.Epoch)
	}
	if cerr != nil {
		log.Printf("[ERROR] could not release the locks Terraform left open; they lapse after their lease_duration: %v", cerr)
	}
	if err != nil {
		log.Fatal(err)
	}
}
