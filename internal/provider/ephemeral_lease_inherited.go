package provider

import (
	"context"
	"os"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// A lease inherited from `s3lock run`. A terraform command that runs under
// `s3lock run NAME -- ...` (say, `sh -c 'terraform plan -out=p && terraform
// apply p'`, which must plan and apply under one lock) already holds the
// lock: the CLI renews it and releases it when the command ends. An
// ephemeral lease on the same lock then uses that lease — after checking
// that it is the lock's current, held epoch — instead of waiting for it;
// it neither renews nor releases it.

// privateInheritedKey marks, in an ephemeral lease's private data, a lease
// inherited from `s3lock run`: its value is the epoch.
const privateInheritedKey = "inherited_epoch"

// inheritedEpoch returns the epoch of the lease `s3lock run` holds on the
// lock, if this process runs under one for it (S3LOCK_BUCKET, S3LOCK_NAME,
// S3LOCK_KEY and S3LOCK_EPOCH, which only `s3lock run` sets together).
func inheritedEpoch(bucket, name string) (uint64, bool) {
	if os.Getenv("S3LOCK_BUCKET") != bucket || os.Getenv("S3LOCK_NAME") != name || os.Getenv("S3LOCK_KEY") == "" {
		return 0, false
	}
	epoch, err := strconv.ParseUint(os.Getenv("S3LOCK_EPOCH"), 10, 64)
	if err != nil || s3lock.Key(name, epoch) != os.Getenv("S3LOCK_KEY") {
		return 0, false
	}
	return epoch, true
}

// checkInherited reads the lock and returns its state if epoch is its
// current, held epoch; otherwise it reports why the inherited lease cannot
// be used.
func checkInherited(ctx context.Context, c *s3lock.Client, bucket, name string, epoch uint64, diags *diag.Diagnostics) (s3lock.State, bool) {
	lease := leaseRef{bucket: bucket, name: name, epoch: epoch}
	st, err := c.Current(ctx, name)
	switch {
	case err != nil:
		diags.Append(inheritedCheckFailed(lease, err))
		return st, false
	case st.Phase() != s3lock.PhaseHeld || st.Epoch != epoch:
		diags.Append(inheritedNotCurrent(lease, st))
		return st, false
	}
	tflog.Info(ctx, "using the lease of the enclosing s3lock run", map[string]any{"bucket": bucket, "lock": name, "epoch": epoch})
	return st, true
}

// loadInherited returns the epoch of an inherited lease recorded in private
// data, or 0.
func loadInherited(ctx context.Context, p privateGetter) uint64 {
	raw, _ := p.GetKey(ctx, privateInheritedKey)
	epoch, _ := strconv.ParseUint(string(raw), 10, 64)
	return epoch
}
