package provider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/s3lock/terraform-provider-s3lock/internal/awsclient"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

var (
	_ validator.String = ruleValidator{}
	_ validator.String = lockNameValidator{}
	_ validator.String = durationValidator{}
)

var accountIDPattern = regexp.MustCompile(`^[0-9]{12}$`)

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

// ruleValidator checks a string with one validation rule of the SDK (or of
// awsclient), so that the provider and the CLI accept the same values, and
// reports a refusal with report.
type ruleValidator struct {
	description string
	rule        func(string) error
	report      func(p path.Path, value string, err error) diag.Diagnostic
}

func (v ruleValidator) Description(context.Context) string { return v.description }

func (v ruleValidator) MarkdownDescription(context.Context) string { return v.description }

func (v ruleValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := v.rule(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.Append(v.report(req.Path, req.ConfigValue.ValueString(), err))
	}
}

// bucketValidator checks a bucket name with s3lock.ValidateConfig.
func bucketValidator() validator.String {
	return ruleValidator{description: "must be a valid S3 bucket name", rule: func(b string) error { return s3lock.ValidateConfig(b) },
		report: func(p path.Path, _ string, err error) diag.Diagnostic { return invalidBucket(p, err) }}
}

// prefixValidator checks a lock-name prefix with s3lock.ValidatePrefix.
func prefixValidator() validator.String {
	return ruleValidator{description: "must be empty or the beginning of a valid lock name", rule: s3lock.ValidatePrefix,
		report: func(p path.Path, prefix string, err error) diag.Diagnostic {
			return invalidPrefix(p, prefix, nameReason(err))
		}}
}

// holderValidator checks a holder identity with s3lock.ValidateHolder.
func holderValidator() validator.String {
	return ruleValidator{description: "must be non-blank UTF-8 without control characters, at most 256 bytes",
		rule:   s3lock.ValidateHolder,
		report: func(p path.Path, _ string, err error) diag.Diagnostic { return invalidHolder(p, err) }}
}

// orderValidator checks an order with s3lock.ParseOrder.
func orderValidator() validator.String {
	return ruleValidator{description: `must be "fifo", "newest" or "none"`,
		rule: func(s string) error {
			_, err := s3lock.ParseOrder(s)
			return err
		},
		report: func(p path.Path, _ string, err error) diag.Diagnostic { return invalidOrder(p, err) }}
}

// endpointValidator checks that an endpoint is an http or https URL.
func endpointValidator() validator.String {
	return ruleValidator{description: "must be an http:// or https:// URL with a host and no credentials",
		rule:   awsclient.ValidateEndpoint,
		report: func(p path.Path, _ string, err error) diag.Diagnostic { return invalidEndpoint(p, err) }}
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
	resp.Diagnostics.Append(invalidLockName(req.Path, name, where, nameReason(err)))
}

// nameReason is why s3lock refused a name or prefix, without the name.
func nameReason(err error) string {
	var ne *s3lock.NameError
	if errors.As(err, &ne) {
		return ne.Reason
	}
	return err.Error()
}

// durationValidator checks a Go duration string ("90s", "5m", "1h30m") and
// its range.
type durationValidator struct {
	min, max time.Duration
	// allowZero accepts "0s" even when min is larger.
	allowZero bool
}

func (v durationValidator) Description(context.Context) string {
	orZero := ""
	if v.allowZero {
		orZero = `, or "0s"`
	}
	return fmt.Sprintf("must be a duration such as \"90s\", \"5m\" or \"1h30m\", between %s and %s%s",
		formatDuration(v.min), formatDuration(v.max), orZero)
}

func (v durationValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v durationValidator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	raw := req.ConfigValue.ValueString()
	d, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		resp.Diagnostics.Append(notADuration(req.Path, raw, lockContext(ctx, req.Config, req.Path)))
	case d == 0 && v.allowZero:
	case d < v.min || d > v.max:
		resp.Diagnostics.Append(durationOutOfRange(req.Path, raw, lockContext(ctx, req.Config, req.Path), v.min, v.max, v.allowZero))
	}
}

// waitTimeoutValidator checks how long an acquisition waits for a held
// lock: "0s" tries once.
var waitTimeoutValidator = durationValidator{min: minWaitTimeout, max: maxWaitTimeout, allowZero: true}

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

// parseOrder parses the order in v, or returns defaultOrder when v is null.
// The validator has checked the value already; the error is for a value that
// reaches an operation without it (a bug).
func parseOrder(v types.String) (s3lock.Order, error) {
	if v.IsNull() || v.IsUnknown() {
		return defaultOrder, nil
	}
	return s3lock.ParseOrder(v.ValueString())
}
