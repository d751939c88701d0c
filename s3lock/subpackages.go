package s3lock

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/s3lock/internal/bridge"
)

// This file is package s3lock's side of the bridge to its sub-packages
// (fence, storecheck: see doc.go for why they are packages of their own):
// they make their requests through the client's request layer, as the rest
// of the package does, without it becoming exported API.

func init() {
	bridge.Register(bridge.Impl{
		Of:       func(client any) bridge.Client { return bridgeClient{client.(*Client)} },
		ClassOf:  func(err error) bridge.Class { return classOf(classify(err)) },
		Describe: describeCause,
	})
}

// bridgeClient is a Client as the sub-packages see it (bridge.Client).
type bridgeClient struct{ c *Client }

func (b bridgeClient) Bucket() string  { return b.c.bucket }
func (b bridgeClient) Owner() *string  { return b.c.owner() }
func (b bridgeClient) Directory() bool { return b.c.directory }
func (b bridgeClient) API() bridge.API { return b.c.api }

func (b bridgeClient) Request(ctx context.Context, req bridge.Request, call func(context.Context) error) error {
	r := b.c.requester()
	if req.Bucket != "" {
		r.bucket = req.Bucket
	}
	r.timeout += req.Extra
	_, err := request(ctx, r, req.Op, req.Key, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
	return err
}

func (b bridgeClient) Detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return b.c.detached(ctx)
}

func (b bridgeClient) PutDefaults(in *s3.PutObjectInput) {
	if aws.ToString(in.Bucket) == b.c.bucket && in.ExpectedBucketOwner == nil {
		in.ExpectedBucketOwner = b.c.owner()
	}
	b.c.cfg.objects.onFencedPut(in)
}

func (b bridgeClient) PutEpoch(ctx context.Context, key, etag string, body []byte) (string, error) {
	return b.c.putEpoch(ctx, key, etag, body)
}

func (b bridgeClient) DeleteKey(ctx context.Context, key string) error {
	return b.c.deleteKey(ctx, key)
}

func (b bridgeClient) DeleteKeys(ctx context.Context, keys []string) error {
	return b.c.deleteKeys(ctx, keys)
}

// ProbeCycle makes one cycle of a real lock, which exercises list, get and
// put as the protocol uses them. The probe lock's name has the reserved
// probe segment, so the calls that check names are bypassed.
func (b bridgeClient) ProbeCycle(ctx context.Context, prefix string) {
	c := b.c
	if err := c.listKeys(ctx, prefix, func(listedKey) {}); err != nil {
		return
	}
	name := prefix + "permissions"
	// A plain lease, whatever the client's defaults for acquisitions (slots,
	// an order, metadata), and no acquisition of the caller's: its requests
	// are reported, no lease event.
	a := acquireConfig{leaseDuration: probeLease, renewInterval: c.renewIntervalFor(probeLease), unobserved: true}
	if lease, err := c.tryAcquire(ctx, name, a); err == nil {
		_, _ = c.current(ctx, name)
		if lease.Release(ctx) != nil {
			lease.Detach() // it lapses within probeLease
		}
	}
}

// classOf is the bridge's class of a failure.
func classOf(f failure) bridge.Class {
	switch f {
	case failPrecondition:
		return bridge.Precondition
	case failConflict:
		return bridge.Conflict
	case failNotFound:
		return bridge.NotFound
	case failNotModified:
		return bridge.NotModified
	case failTransient:
		return bridge.Transient
	case failAccessDenied, failCredentials:
		return bridge.Denied
	case failUnsupported:
		return bridge.Unsupported
	}
	return bridge.Other
}
