package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/s3lock/terraform-provider-s3lock/s3lock/storecheck"
)

var (
	_ action.Action               = (*verifyAction)(nil)
	_ action.ActionWithConfigure  = (*verifyAction)(nil)
	_ action.ActionWithModifyPlan = (*verifyAction)(nil)
)

// NewVerifyAction returns the s3lock_verify action (Terraform 1.14 and
// later).
func NewVerifyAction() action.Action { return &verifyAction{} }

// verifyAction checks a bucket before anyone relies on it: the SDK's
// storecheck.Run, as `s3lock verify` runs it.
type verifyAction struct {
	factory *clientFactory
}

// probeFolder is the folder under the lock prefix that the SDK's store check
// writes its probes into (storecheck.Run takes the lock prefix and adds it;
// Report.ProbePrefix is the whole probe prefix). It is spelled out
// here only to tell people where the probes go: in the docs, and before the
// check runs, when there is no Report yet.
const probeFolder = "s3lock-probe/"

// verifyModelV0 is the configuration of s3lock_verify.
type verifyModelV0 struct {
	Bucket types.String `tfsdk:"bucket"`
	Prefix types.String `tfsdk:"prefix"`
}

func (a *verifyAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_verify"
}

func (a *verifyAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Checks a bucket before anyone relies on it, as `s3lock verify` does: that the store " +
			"refuses a second create with `If-None-Match: *` and a write with `If-Match` on a wrong ETag (a store " +
			"that ignores them cannot provide mutual exclusion), that it lists keys in ascending order (or, on an S3 " +
			"directory bucket, which lists in no order and which s3lock reads whole, that paging shows every key " +
			"once) and reports each object's size as written (slot locks read them), and that the provider's credentials may list, " +
			"get, put and delete under the lock prefix (`s3:ListBucket`, `s3:GetObject`, `s3:PutObject`, " +
			"`s3:DeleteObject`). The probes write under `<prefix>" + probeFolder + "`: throwaway " +
			"objects that are deleted again, and a lock named `<prefix>" + probeFolder + "permissions` " +
			"that is acquired and released (its last few epochs stay, like any lock's). Each check is reported as " +
			"a progress message; the action fails unless every check passes. Invoke it with " +
			"`terraform apply -invoke=action.s3lock_verify.<name>`, or run it before a resource with an " +
			"`action_trigger`.",
		Attributes: map[string]schema.Attribute{
			"bucket": schema.StringAttribute{
				MarkdownDescription: "Bucket to check.",
				Required:            true,
				Validators:          []validator.String{bucketValidator()},
			},
			"prefix": schema.StringAttribute{
				MarkdownDescription: "The prefix the locks live under, ending in a slash, e.g. `\"locks/\"`, when the " +
					"credentials are limited to it. Default: the whole bucket (probes under `" +
					probeFolder + "`).",
				Optional:   true,
				Validators: []validator.String{prefixValidator(), probePrefixValidator()},
			},
		},
	}
}

func (a *verifyAction) Configure(_ context.Context, req action.ConfigureRequest, resp *action.ConfigureResponse) {
	f, err := factoryFrom(req.ProviderData, "s3lock_verify action")
	if err != nil {
		resp.Diagnostics.Append(unexpectedProviderData(err))
		return
	}
	a.factory = f
}

// ModifyPlan refuses, when Terraform plans to invoke the action, a bucket
// that is null (Terraform does not, for actions).
func (a *verifyAction) ModifyPlan(ctx context.Context, req action.ModifyPlanRequest, resp *action.ModifyPlanResponse) {
	var cfg verifyModelV0
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(cfg.nulls()...)
	}
}

// nulls reports the required arguments that are null.
func (m verifyModelV0) nulls() diag.Diagnostics {
	return nullArguments("s3lock_verify", map[string]attr.Value{"bucket": m.Bucket})
}

// Invoke runs the SDK's store check and reports each check as a progress
// message; it fails unless every check passed.
func (a *verifyAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	var cfg verifyModelV0
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(cfg.nulls()...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	bucket, prefix := cfg.Bucket.ValueString(), cfg.Prefix.ValueString()
	client, ok := a.factory.client(ctx, bucket, &resp.Diagnostics)
	if !ok {
		return
	}
	progress(resp, fmt.Sprintf("Checking bucket %q, with probes under s3://%s/%s.", bucket, bucket, prefix+probeFolder))
	rep, err := storecheck.Run(ctx, client, prefix)
	if err != nil {
		resp.Diagnostics.Append(storeCheckInterrupted(bucket, err))
		return
	}
	for _, c := range rep.Checks {
		progress(resp, checkLine(c))
	}
	tflog.Info(ctx, "checked store", map[string]any{"bucket": bucket, "probe_prefix": rep.ProbePrefix, "ok": rep.OK})
	if !rep.OK {
		resp.Diagnostics.Append(storeCheckFailed(rep))
		return
	}
	progress(resp, fmt.Sprintf("Bucket %q passed all %d checks.", bucket, len(rep.Checks)))
}

// probePrefixValidator checks that the lock prefix a store check probes
// under is a path (empty, or ending in a slash), so that the probes go into
// a folder of their own: the SDK's storecheck refuses anything else.
func probePrefixValidator() validator.String {
	return ruleValidator{description: "must be empty or end with a slash",
		rule: func(prefix string) error {
			if prefix != "" && !strings.HasSuffix(prefix, "/") {
				return errors.New("it must end with a slash, so that the probes go into a folder of their own")
			}
			return nil
		},
		report: func(p path.Path, prefix string, err error) diag.Diagnostic {
			return invalidPrefix(p, prefix, err.Error()+` (e.g. "locks/")`)
		}}
}
