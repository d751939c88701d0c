package provider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

var (
	_ validator.String = bucketValidator{}
	_ validator.String = lockNameValidator{}
	_ validator.String = durationValidator{}
	_ validator.String = holderValidator{}
	_ validator.String = endpointValidator{}
)

var (
	accountIDPattern = regexp.MustCompile(`^[0-9]{12}$`)
	arnPattern       = regexp.MustCompile(`^arn:[a-z0-9-]+:[a-z0-9-]+:[a-z0-9-]*:[0-9]*:.+$`)
)

// lockContext describes the lock an attribute belongs to, from its sibling
// bucket and name attributes, for diagnostics: ` (lock "x" in bucket "y")`.
// It returns "" when neither is known.
func lockContext(ctx context.Context, cfg tfsdk.Config, p path.Path) string {
	var bucket, name types.String
	parent := p.ParentPath()
	_ = cfg.GetAttribute(ctx, parent.AtName("bucket"), &bucket)
	_ = cfg.GetAttribute(ctx, parent.AtName("name"), &name)
	return describeLock(bucket, name)
}

func describeLock(bucket, name types.String) string {
	known := func(v types.String) bool { return !v.IsNull() && !v.IsUnknown() }
	switch {
	case known(bucket) && known(name):
		return fmt.Sprintf(" (lock %q in bucket %q)", name.ValueString(), bucket.ValueString())
	case known(bucket):
		return fmt.Sprintf(" (bucket %q)", bucket.ValueString())
	case known(name):
		return fmt.Sprintf(" (lock %q)", name.ValueString())
	}
	return ""
}

// bucketValidator checks a bucket name with s3lock.ValidateBucket.
type bucketValidator struct{}

func (bucketValidator) Description(context.Context) string {
	return "must be a valid S3 bucket name"
}

func (v bucketValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (bucketValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := s3lock.ValidateBucket(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid bucket name", strings.TrimPrefix(err.Error(), "s3lock: "))
	}
}

// lockNameValidator checks a lock name with s3lock.ValidateName: it rejects
// empty names and names that could escape their key prefix.
type lockNameValidator struct{}

func (lockNameValidator) Description(context.Context) string {
	return "must be a valid lock name: key path segments of letters, digits and -_.=+@,:!~ separated by single slashes"
}

func (v lockNameValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (lockNameValidator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	name := req.ConfigValue.ValueString()
	err := s3lock.ValidateName(name)
	if err == nil {
		return
	}
	var bucket types.String
	_ = req.Config.GetAttribute(ctx, req.Path.ParentPath().AtName("bucket"), &bucket)
	where := ""
	if !bucket.IsNull() && !bucket.IsUnknown() {
		where = fmt.Sprintf(" for bucket %q", bucket.ValueString())
	}
	reason := err.Error()
	var ne *s3lock.NameError
	if errors.As(err, &ne) {
		reason = ne.Reason
	}
	resp.Diagnostics.AddAttributeError(req.Path, "Invalid lock name",
		fmt.Sprintf("Lock name %q%s is invalid: %s. A lock name is a key path inside the bucket: segments of "+
			"letters, digits and -_.=+@,:!~ separated by single slashes, e.g. \"deploy/prod\".", name, where, reason))
}

// durationValidator checks a Go duration string ("90s", "5m", "1h30m") and
// its range.
type durationValidator struct {
	min, max time.Duration
	// allowZero accepts "0s" even when min is larger.
	allowZero bool
}

func (v durationValidator) Description(context.Context) string {
	return fmt.Sprintf("must be a duration such as \"90s\", \"5m\" or \"1h30m\", between %s and %s",
		formatDuration(v.min), formatDuration(v.max))
}

func (v durationValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v durationValidator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	raw := req.ConfigValue.ValueString()
	attr := req.Path.String()
	d, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid duration",
			fmt.Sprintf("%s = %q%s is not a duration: write a number with a unit, such as \"90s\", \"5m\" or \"1h30m\" "+
				"(units: ms, s, m, h).", attr, raw, lockContext(ctx, req.Config, req.Path)))
	case d == 0 && v.allowZero:
	case d < v.min || d > v.max:
		zero := ""
		if v.allowZero {
			zero = ` (or "0s")`
		}
		resp.Diagnostics.AddAttributeError(req.Path, "Duration out of range",
			fmt.Sprintf("%s = %q%s is outside the allowed range [%s, %s]%s.",
				attr, raw, lockContext(ctx, req.Config, req.Path), formatDuration(v.min), formatDuration(v.max), zero))
	}
}

// holderValidator checks a holder identity with s3lock.ValidateHolder.
type holderValidator struct{}

func (holderValidator) Description(context.Context) string {
	return "must be non-blank UTF-8 without control characters, at most 256 bytes"
}

func (v holderValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (holderValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := s3lock.ValidateHolder(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid holder", err.Error())
	}
}

// formatDuration writes d the way people write durations: "1h", "1h30m",
// "90s" stays "1m30s", "500ms".
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	if d%time.Second != 0 || d < 0 {
		return d.String()
	}
	var b strings.Builder
	h, m, s := d/time.Hour, (d%time.Hour)/time.Minute, (d%time.Minute)/time.Second
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if s > 0 {
		fmt.Fprintf(&b, "%ds", s)
	}
	return b.String()
}

// parseDuration parses the duration in v, or returns def when v is null.
// Validators have checked the value already; the error is for values that
// reach an operation without them (a bug), so it names the attribute.
func parseDuration(attr string, v types.String, def time.Duration) (time.Duration, error) {
	if v.IsNull() || v.IsUnknown() {
		return def, nil
	}
	d, err := time.ParseDuration(v.ValueString())
	if err != nil {
		return 0, fmt.Errorf("%s = %q is not a duration: %w", attr, v.ValueString(), err)
	}
	return d, nil
}
