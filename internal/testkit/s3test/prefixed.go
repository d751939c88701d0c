package s3test

import (
	"context"
	"log"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// ExampleBucket stands in for a reader's own setup in the SDK's Example
// functions: an S3 client and a bucket. They come from the test store: a
// bucket of the example's own on the local server, or a fresh prefix of the
// shared bucket of an external endpoint (S3LOCK_TEST_ENDPOINT), which the
// client keeps every key under, so that the examples' lock names leave
// nothing outside it. It exits the test binary if there is no store.
func ExampleBucket() (*Prefixed, string) {
	ns, err := Open(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	return &Prefixed{Client: ns.Client, Prefix: ns.Prefix}, ns.Bucket
}

// Prefixed is an S3 client that keeps every key under a prefix: it adds the
// prefix to the keys (and listing prefixes) of each request and takes it off
// those of each answer. Code written for a bucket of its own — the SDK's
// Example functions, which name locks such as "deploy/prod" — then runs
// unchanged in a fresh prefix of a shared bucket and leaves nothing outside
// it. It has the methods of s3lock's S3API, so s3lock.New takes it.
type Prefixed struct {
	Client *s3.Client
	Prefix string
}

func (p *Prefixed) key(k *string) *string {
	if k == nil {
		return nil
	}
	return aws.String(p.Prefix + *k)
}

func (p *Prefixed) strip(k *string) *string {
	if k == nil {
		return nil
	}
	return aws.String(strings.TrimPrefix(*k, p.Prefix))
}

// GetObject is s3.Client.GetObject with the key under the prefix.
func (p *Prefixed) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c := *in
	c.Key = p.key(in.Key)
	return p.Client.GetObject(ctx, &c, opts...)
}

// HeadObject is s3.Client.HeadObject with the key under the prefix.
func (p *Prefixed) HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	c := *in
	c.Key = p.key(in.Key)
	return p.Client.HeadObject(ctx, &c, opts...)
}

// PutObject is s3.Client.PutObject with the key under the prefix.
func (p *Prefixed) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	c := *in
	c.Key = p.key(in.Key)
	return p.Client.PutObject(ctx, &c, opts...)
}

// DeleteObject is s3.Client.DeleteObject with the key under the prefix.
func (p *Prefixed) DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, opts ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	c := *in
	c.Key = p.key(in.Key)
	return p.Client.DeleteObject(ctx, &c, opts...)
}

// DeleteObjects is s3.Client.DeleteObjects with every key under the prefix.
func (p *Prefixed) DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, opts ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error) {
	c := *in
	if in.Delete != nil {
		d := *in.Delete
		d.Objects = make([]types.ObjectIdentifier, len(in.Delete.Objects))
		for i, o := range in.Delete.Objects {
			o.Key = p.key(o.Key)
			d.Objects[i] = o
		}
		c.Delete = &d
	}
	out, err := p.Client.DeleteObjects(ctx, &c, opts...)
	if out != nil {
		for i := range out.Deleted {
			out.Deleted[i].Key = p.strip(out.Deleted[i].Key)
		}
		for i := range out.Errors {
			out.Errors[i].Key = p.strip(out.Errors[i].Key)
		}
	}
	return out, err
}

// ListObjectsV2 is s3.Client.ListObjectsV2 within the prefix.
func (p *Prefixed) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	c := *in
	c.Prefix = aws.String(p.Prefix + aws.ToString(in.Prefix))
	if in.StartAfter != nil {
		c.StartAfter = p.key(in.StartAfter)
	}
	out, err := p.Client.ListObjectsV2(ctx, &c, opts...)
	if out != nil {
		out.Prefix = in.Prefix
		out.StartAfter = in.StartAfter
		for i := range out.Contents {
			out.Contents[i].Key = p.strip(out.Contents[i].Key)
		}
		for i := range out.CommonPrefixes {
			out.CommonPrefixes[i].Prefix = p.strip(out.CommonPrefixes[i].Prefix)
		}
	}
	return out, err
}
