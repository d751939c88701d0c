package s3test_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
)

// directoryBucket starts the emulation in front of the local store and
// returns a client of it (as the AWS SDK makes one for a directory bucket:
// with sessions) and a fresh bucket named as a directory bucket.
func directoryBucket(t *testing.T, secret string) (*s3.Client, string) {
	t.Helper()
	_, tg, bucket := s3test.NewDirectoryBucket(t)
	if secret != "" {
		tg.SecretKey = secret
	}
	return s3test.NewClient(t, tg), bucket
}

// TestDirectoryBuckets_ListsAsAWSDocuments: pages in no key order, each key
// and common prefix exactly once across continuation tokens; the prefixes,
// delimiters and StartAfter AWS does not support are refused.
func TestDirectoryBuckets_ListsAsAWSDocuments(t *testing.T) {
	t.Parallel()
	c, bucket := directoryBucket(t, "")
	var want []string
	for i := range 12 {
		key := fmt.Sprintf("dir/k%02d", i)
		if i >= 10 {
			key = fmt.Sprintf("dir/sub%d/x", i) // listed as the common prefix dir/subN/
			want = append(want, fmt.Sprintf("dir/sub%d/", i))
		} else {
			want = append(want, key)
		}
		if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
			Body: strings.NewReader("x"), IfNoneMatch: aws.String("*")}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("dir/"),
		Delimiter: aws.String("/"), MaxKeys: aws.Int32(5)})
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, o := range out.Contents {
			got = append(got, aws.ToString(o.Key))
		}
		for _, cp := range out.CommonPrefixes {
			got = append(got, aws.ToString(cp.Prefix))
		}
	}
	if pages != 3 {
		t.Errorf("12 entries, 5 per page, came in %d pages; want 3", pages)
	}
	if slices.IsSorted(got) {
		t.Errorf("listed in key order: %v; the emulation lists in no key order", got)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("listed %v; want each of %v once", got, want)
	}

	for _, in := range []*s3.ListObjectsV2Input{
		{Prefix: aws.String("dir/k0")},
		{Prefix: aws.String("dir/"), Delimiter: aws.String("-")},
		{Prefix: aws.String("dir/"), StartAfter: aws.String("dir/k03")},
	} {
		in.Bucket = aws.String(bucket)
		var apiErr smithy.APIError
		if _, err := c.ListObjectsV2(t.Context(), in); !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidArgument" {
			t.Errorf("ListObjectsV2(prefix %q, delimiter %q, start after %q) = %v; want InvalidArgument",
				aws.ToString(in.Prefix), aws.ToString(in.Delimiter), aws.ToString(in.StartAfter), err)
		}
	}
}

// TestDirectoryBuckets_LenientModes: IgnoringStartAfter lists from the
// beginning whatever StartAfter says; StartAfterInListingOrder lists the
// keys that follow StartAfter in the listing's own order (those after it
// in the whole listing), not the keys greater than it. Both accept a
// prefix that does not end in "/".
func TestDirectoryBuckets_LenientModes(t *testing.T) {
	t.Parallel()
	d, tg, bucket := s3test.NewDirectoryBucket(t)
	c := s3test.NewClient(t, tg)
	for i := range 8 {
		if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket),
			Key: aws.String(fmt.Sprintf("dir/k%02d", i)), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(startAfter string) []string {
		t.Helper()
		in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("dir/k")}
		if startAfter != "" {
			in.StartAfter = aws.String(startAfter)
		}
		out, err := c.ListObjectsV2(t.Context(), in)
		if err != nil {
			t.Fatalf("ListObjectsV2(prefix dir/k, start after %q): %v", startAfter, err)
		}
		var keys []string
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		return keys
	}
	d.SetLeniency(s3test.IgnoringStartAfter)
	whole := list("")
	if len(whole) != 8 {
		t.Fatalf("listed %v; want the 8 keys", whole)
	}
	if got := list(whole[3]); !slices.Equal(got, whole) {
		t.Errorf("IgnoringStartAfter: start after %s listed %v; want the whole listing %v", whole[3], got, whole)
	}
	d.SetLeniency(s3test.StartAfterInListingOrder)
	if got := list(whole[3]); !slices.Equal(got, whole[4:]) {
		t.Errorf("StartAfterInListingOrder: start after %s listed %v; want what follows it in %v", whole[3], got, whole)
	}
	d.SetLeniency(s3test.Strict)
	var apiErr smithy.APIError
	if _, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("dir/k")}); !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidArgument" {
		t.Errorf("Strict again: a prefix without its \"/\" = %v; want InvalidArgument", err)
	}
}

// TestDirectoryBuckets_DeletesEmptyDirectories: deleting a directory's last
// object leaves no directory behind in listings (versitygw's posix backend
// does so itself, as AWS documents directory buckets to).
func TestDirectoryBuckets_DeletesEmptyDirectories(t *testing.T) {
	t.Parallel()
	c, bucket := directoryBucket(t, "")
	for _, key := range []string{"a/b/c", "a/d"} {
		if _, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("a/b/c")}); err != nil {
		t.Fatal(err)
	}
	out, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("a/"), Delimiter: aws.String("/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.CommonPrefixes) != 0 || len(out.Contents) != 1 {
		t.Errorf("after deleting a/b/c, a/ lists %d objects and %d directories; want a/d only", len(out.Contents), len(out.CommonPrefixes))
	}
}

// TestDirectoryBuckets_RefusesAWrongSecretAtCreateSession: the session the
// SDK asks for first is refused to a client whose signature is wrong.
func TestDirectoryBuckets_RefusesAWrongSecretAtCreateSession(t *testing.T) {
	t.Parallel()
	c, bucket := directoryBucket(t, "not-the-secret")
	_, err := c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("x")})
	if err == nil || !strings.Contains(err.Error(), "CreateSession") || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
		t.Errorf("PutObject with a wrong secret = %v; want CreateSession refused with SignatureDoesNotMatch", err)
	}
}
