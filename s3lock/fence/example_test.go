package fence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/fence"
)

// Put refuses a write from a lease older than the last writer's.
func ExamplePut() {
	api, bucket := s3test.ExampleBucket() // your *s3.Client and bucket
	ctx := context.Background()
	locks, err := s3lock.New(api, bucket)
	if err != nil {
		log.Fatal(err)
	}
	write := func(epoch uint64, body string) error {
		_, err := fence.Put(ctx, locks, epoch, &s3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String("state.json"), Body: strings.NewReader(body),
		})
		return err
	}
	fmt.Println(write(7, "written under epoch 7"))
	err = write(6, "a paused former holder")
	fmt.Println(errors.Is(err, fence.ErrFenced))
	// Output:
	// <nil>
	// true
}
