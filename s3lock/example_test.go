package s3lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// exampleBucket stands in for your own setup: an *s3.Client and a bucket.
func exampleBucket() (s3lock.S3API, string) { return s3test.ExampleBucket() }

// Take a lock, do the work under its epoch, release it.
func Example() {
	api, bucket := exampleBucket() // e.g. s3.NewFromConfig(cfg), "my-locks"
	ctx := context.Background()

	locks, err := s3lock.New(api, bucket, s3lock.WithHolder("deployer-1"))
	if err != nil {
		log.Fatal(err)
	}
	lease, err := locks.Acquire(ctx, "prod/db-migration") // waits while someone else holds it
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", lease.Token().Key(), "as epoch", lease.Token().Epoch)
	// ... the critical section; pass lease.Token().Epoch along as a fencing token ...
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: holding prod/db-migration/lock-0000000001.json as epoch 1
}

// TryAcquire returns at once; a held lock says who holds it.
func ExampleClient_TryAcquire() {
	api, bucket := exampleBucket()
	ctx := context.Background()
	alice, _ := s3lock.New(api, bucket, s3lock.WithHolder("alice"))
	bob, _ := s3lock.New(api, bucket, s3lock.WithHolder("bob"))

	lease, err := alice.TryAcquire(ctx, "reports")
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = lease.Release(ctx) }()

	_, err = bob.TryAcquire(ctx, "reports")
	var held *s3lock.HeldError
	if errors.As(err, &held) {
		fmt.Printf("held by %s at epoch %d\n", held.Holder, held.Epoch)
	}
	// Output: held by alice at epoch 1
}

// Do runs a function under the lock; its context ends if the lease is lost.
func ExampleClient_Do() {
	api, bucket := exampleBucket()
	locks, _ := s3lock.New(api, bucket, s3lock.WithHolder("cron-7"))
	err := locks.Do(context.Background(), "nightly-report", func(ctx context.Context, lease *s3lock.Lease) error {
		fmt.Println("generating the report under epoch", lease.Token().Epoch)
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// generating the report under epoch 1
	// done: <nil>
}

// Current reads who holds a lock without taking it.
func ExampleClient_Current() {
	api, bucket := exampleBucket()
	ctx := context.Background()
	locks, _ := s3lock.New(api, bucket, s3lock.WithHolder("ci-runner-3"))
	lease, _ := locks.TryAcquire(ctx, "deploy", s3lock.WithMetadata(map[string]string{"commit": "4f2a9c1"}))
	defer func() { _ = lease.Release(ctx) }()

	st, err := locks.Current(ctx, "deploy")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Held, st.Holder, st.Epoch, st.Metadata["commit"])
	// Output: true ci-runner-3 1 4f2a9c1
}

// A lease can be handed to another process: detach it, pass the token,
// resume it there.
func ExampleClient_Resume() {
	api, bucket := exampleBucket()
	ctx := context.Background()
	locks, _ := s3lock.New(api, bucket, s3lock.WithLeaseDuration(10*time.Minute))

	lease, _ := locks.TryAcquire(ctx, "pipeline/release", s3lock.WithoutAutoRenew())
	token := lease.Detach().String() // e.g. saved as a pipeline artifact

	// ... a later step ...
	t, err := s3lock.ParseToken(token)
	if err != nil {
		log.Fatal(err)
	}
	resumed, err := locks.Resume(ctx, t, s3lock.WithoutAutoRenew())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("resumed epoch", resumed.Token().Epoch, "release:", resumed.Release(ctx))
	// Output: resumed epoch 1 release: <nil>
}

// Deploys of successive commits wait with OrderNewest: when a newer deploy
// queues, an older one still waiting stands down instead of rolling
// production back after the newer one.
func ExampleWithOrder() {
	api, bucket := exampleBucket()
	ctx := context.Background()
	running, _ := s3lock.New(api, bucket, s3lock.WithHolder("deploy-commit-1"))
	lease, err := running.TryAcquire(ctx, "deploy/prod")
	if err != nil {
		log.Fatal(err)
	}

	older, _ := s3lock.New(api, bucket, s3lock.WithHolder("deploy-commit-2"))
	newer, _ := s3lock.New(api, bucket, s3lock.WithHolder("deploy-commit-3"))
	olderDone := make(chan error, 1)
	go func() {
		_, err := older.Acquire(ctx, "deploy/prod", s3lock.WithOrder(s3lock.OrderNewest))
		olderDone <- err
	}()
	for { // commit 2 queues first
		if line, _ := running.Line(ctx, "deploy/prod"); len(line) == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	newerDone := make(chan *s3lock.Lease, 1)
	go func() {
		l, err := newer.Acquire(ctx, "deploy/prod", s3lock.WithOrder(s3lock.OrderNewest))
		if err != nil {
			log.Fatal(err)
		}
		newerDone <- l
	}()

	err = <-olderDone // within about a second of commit 3 queueing
	var se *s3lock.SupersededError
	if errors.As(err, &se) {
		fmt.Println("commit 2 stood down for", se.By)
	}
	_ = lease.Release(ctx)
	next := <-newerDone
	fmt.Println("deploying", next.State().Holder)
	_ = next.Release(ctx)
	// Output:
	// commit 2 stood down for deploy-commit-3
	// deploying deploy-commit-3
}

// At most two heavy jobs at once: a lock with two slots. Each holder's epoch
// is its slot's fencing token.
func ExampleWithSlots() {
	api, bucket := exampleBucket()
	ctx := context.Background()
	var leases []*s3lock.Lease
	for _, job := range []string{"job-a", "job-b"} {
		locks, _ := s3lock.New(api, bucket, s3lock.WithHolder(job))
		lease, err := locks.TryAcquire(ctx, "jobs/heavy", s3lock.WithSlots(2))
		if err != nil {
			log.Fatal(err)
		}
		leases = append(leases, lease)
	}
	third, _ := s3lock.New(api, bucket, s3lock.WithHolder("job-c"))
	_, err := third.TryAcquire(ctx, "jobs/heavy", s3lock.WithSlots(2))
	if errors.Is(err, s3lock.ErrHeld) {
		fmt.Println("job-c waits: every slot is held")
	}
	st, _ := third.Current(ctx, "jobs/heavy")
	fmt.Println(len(st.Holders), "holders of", st.Slots, "slots")
	for _, l := range leases {
		_ = l.Release(ctx)
	}
	// Output:
	// job-c waits: every slot is held
	// 2 holders of 2 slots
}
