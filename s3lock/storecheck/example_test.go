package storecheck_test

import (
	"context"
	"fmt"
	"log"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/storecheck"
)

// Check a bucket before relying on it for locks, with probes under the
// prefix the locks live under.
func ExampleRun() {
	api, bucket := s3test.ExampleBucket() // your *s3.Client and bucket
	ctx := context.Background()
	locks, err := s3lock.New(api, bucket)
	if err != nil {
		log.Fatal(err)
	}
	rep, err := storecheck.Run(ctx, locks, "locks/")
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range rep.Checks {
		fmt.Println(c.Name, c.Status)
	}
	fmt.Println("ok:", rep.OK)
	// Output:
	// conditional writes ok
	// listing order ok
	// list ok
	// get ok
	// put ok
	// delete ok
	// ok: true
}

// Verify says with an error whether the store can hold locks at all.
func ExampleVerify() {
	api, bucket := s3test.ExampleBucket()
	locks, err := s3lock.New(api, bucket)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(storecheck.Verify(context.Background(), locks, ""))
	// Output: <nil>
}
