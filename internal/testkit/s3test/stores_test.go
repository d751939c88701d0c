package s3test_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// TestOutside_FindsWhatATestRunLeftOutsideItsPrefix: on a real versitygw,
// EnsureBucket creates the shared bucket once and keeps it (and its keys)
// when called again, and Outside lists exactly the keys outside the tests'
// prefix, counting those inside.
func TestOutside_FindsWhatATestRunLeftOutsideItsPrefix(t *testing.T) {
	st, err := s3server.StartStore(t.Context(), s3server.Versitygw, s3server.StoreOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Stop)
	c := s3server.NewClient(st, nil)
	if err := s3test.EnsureBucket(t.Context(), c, s3test.StoreBucket); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{s3test.TestPrefix + "a1/lock-1.json", s3test.TestPrefix + "b2/x", "s3lock-probe/probe.json", "stray"} {
		if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(s3test.StoreBucket), Key: aws.String(k), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s3test.EnsureBucket(t.Context(), c, s3test.StoreBucket); err != nil {
		t.Fatalf("EnsureBucket on an existing bucket: %v", err)
	}
	outside, inside, err := s3test.Outside(t.Context(), c, s3test.StoreBucket, s3test.TestPrefix)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(outside)
	if inside != 2 || !slices.Equal(outside, []string{"s3lock-probe/probe.json", "stray"}) {
		t.Fatalf("Outside = %q, %d inside; want the probe and the stray key outside, 2 inside", outside, inside)
	}
}
