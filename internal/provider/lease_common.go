package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// privateTokenKey is the private-state key under which a lease's
// s3lock.Token is kept, so that a later operation can resume the lease.
const privateTokenKey = "lease_token"

// privateGetter and privateSetter are the parts of the framework's private
// state (resources) and private data (ephemeral resources) used here.
type privateGetter interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
}

type privateSetter interface {
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}

// storeToken saves the token that resumes a lease.
func storeToken(ctx context.Context, p privateSetter, t s3lock.Token) diag.Diagnostics {
	return p.SetKey(ctx, privateTokenKey, []byte(t.String()))
}

// loadToken reads the token saved by storeToken; nil when there is none.
func loadToken(ctx context.Context, p privateGetter) (*s3lock.Token, diag.Diagnostics) {
	raw, diags := p.GetKey(ctx, privateTokenKey)
	if diags.HasError() || len(raw) == 0 {
		return nil, diags
	}
	t, err := s3lock.ParseToken(string(raw))
	if err != nil {
		diags.AddError("Unreadable lease token", "The lease token kept in the resource's private state cannot be read: "+
			err.Error()+". Remove the resource from state (terraform state rm) and import the lease again.")
		return nil, diags
	}
	return &t, diags
}

// acquireLease takes the lock: at once if it is free; if it is held, it
// waits up to wait, reporting each holder it waits for through tflog (and
// the test hook). Any other failure, such as an unreachable store or denied
// access, is returned at once: only a held lock is worth waiting for.
func acquireLease(ctx context.Context, f *clientFactory, c *s3lock.Client, name string, wait time.Duration, opts ...s3lock.AcquireOption) (*s3lock.Lease, error) {
	observe := func(h *s3lock.HeldError) {
		tflog.Info(ctx, "waiting for lock", map[string]any{
			"bucket":      h.Bucket,
			"lock":        h.Name,
			"holder":      h.Holder,
			"epoch":       h.Epoch,
			"key":         h.Key,
			"expires_in":  h.ExpiresIn.Round(time.Second).String(),
			"acquired_at": formatTime(h.AcquiredAt),
		})
		if f.hooks.onWait != nil {
			f.hooks.onWait(h)
		}
	}
	opts = append(opts, s3lock.WithWaitObserver(observe))
	lease, err := c.TryAcquire(ctx, name, opts...)
	var held *s3lock.HeldError
	if !errors.As(err, &held) || wait <= 0 {
		return lease, err
	}
	tflog.Info(ctx, "lock is held; waiting for it", map[string]any{
		"bucket": c.Bucket(), "lock": name, "holder": held.Holder, "epoch": held.Epoch, "wait": wait.String(),
	})
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return c.Acquire(wctx, name, opts...)
}

// resumeLease takes over the lease of a token, or, when there is no token
// (state written by hand), the lock's current epoch if it is epoch. The
// returned lease does not renew itself; callers Detach or Release it.
func resumeLease(ctx context.Context, c *s3lock.Client, token *s3lock.Token, name string, epoch uint64) (*s3lock.Lease, error) {
	if token != nil {
		return c.Resume(ctx, *token, s3lock.WithoutAutoRenew())
	}
	tflog.Debug(ctx, "no lease token in private state; adopting the lock's current epoch", map[string]any{
		"bucket": c.Bucket(), "lock": name, "epoch": epoch,
	})
	return c.Adopt(ctx, name, epoch, s3lock.WithoutAutoRenew())
}

// isLost reports whether err says that a lease is over: released, lapsed,
// superseded or deleted. Such a lease can be neither renewed nor released.
func isLost(err error) bool {
	return errors.Is(err, s3lock.ErrLeaseLost) || errors.Is(err, s3lock.ErrReleased)
}

// epochObjects names the keys of a lock for diagnostics.
func epochObjects(bucket, name string) string {
	return fmt.Sprintf("s3://%s/%s/lock-*.json", bucket, name)
}

// lockErrorDetail explains a failed operation on a lock: which lock, which
// bucket and keys, the error, and what to do about it.
func lockErrorDetail(bucket, name string, epoch uint64, err error) string {
	where := epochObjects(bucket, name)
	if epoch > 0 {
		where = fmt.Sprintf("s3://%s/%s", bucket, s3lock.Key(name, epoch))
	}
	msg := fmt.Sprintf("Lock %q in bucket %q (%s): %v", name, bucket, where, err)
	if hint := hintFor(bucket, name+"/*", err); hint != "" {
		msg += "\n\n" + hint
	}
	return msg
}

// hintFor says what to do about err, beyond the hint the SDK's own error
// already gives; "" when there is nothing to add. objects names the keys
// concerned, e.g. "deploy/prod/*".
func hintFor(bucket, objects string, err error) string {
	switch {
	case errors.Is(err, s3lock.ErrHeld):
		return "Someone else holds the lock. Wait for them to release it (raise the wait time: timeouts.create " +
			"or wait_timeout), or, if the holder is gone for good, force-release its epoch with the s3lock CLI."
	case errors.Is(err, s3lock.ErrAccessDenied):
		return fmt.Sprintf("Check the provider's credentials (access_key and secret_key, profile, assume_role, or the "+
			"AWS environment) and that they allow s3:ListBucket on bucket %q and s3:GetObject, s3:PutObject and "+
			"s3:DeleteObject on %s.", bucket, objects)
	case errors.Is(err, s3lock.ErrUnavailable):
		return "Check the provider's endpoints.s3, region and the network. Each request was retried " +
			"max_retries times before giving up."
	case errors.Is(err, s3lock.ErrConditionalWritesUnsupported):
		return "This store does not enforce S3 conditional writes, so it cannot provide mutual exclusion."
	case errors.Is(err, s3lock.ErrCorruptLease):
		return "An object in the lock's key prefix is not an s3lock lease; remove it or use another lock name."
	}
	return ""
}

// formatTime writes a time as RFC 3339 in UTC; the zero time is "".
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// timeValue is formatTime as a Terraform value; the zero time is null.
func timeValue(t time.Time) types.String {
	if t.IsZero() {
		return types.StringNull()
	}
	return types.StringValue(formatTime(t))
}

// stringOrNull is s as a Terraform value; "" is null.
func stringOrNull(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

// metadataValue is lease metadata as a Terraform map; empty is null.
func metadataValue(m map[string]string) types.Map {
	if len(m) == 0 {
		return types.MapNull(types.StringType)
	}
	elems := make(map[string]attr.Value, len(m))
	for k, v := range m {
		elems[k] = types.StringValue(v)
	}
	return types.MapValueMust(types.StringType, elems)
}

// metadataFrom reads a metadata map from configuration; nil when null.
func metadataFrom(ctx context.Context, v types.Map) (map[string]string, diag.Diagnostics) {
	if v.IsNull() || v.IsUnknown() {
		return nil, nil
	}
	m := map[string]string{}
	diags := v.ElementsAs(ctx, &m, false)
	return m, diags
}
