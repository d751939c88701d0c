package provider

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	ephschema "github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	provschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	resschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/statestore"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// TestDurations_ZeroIsRefusedOrDoesWhatTheDocsSay: every duration attribute
// of the provider, its resources, ephemeral resources, data sources and
// state store is listed here with what "0s" means. A "0s" that means
// nothing, and every negative duration, is refused with an error that names
// the attribute and its range; a "0s" that means something is accepted and
// said in the attribute's description (issue 36: a zero lease must not
// silently become another lease). A duration attribute missing from the
// table fails the test.
func TestDurations_ZeroIsRefusedOrDoesWhatTheDocsSay(t *testing.T) {
	zeroMeans := map[string]string{ // "": "0s" is refused
		"provider.assume_role.duration":                   "",
		"provider.assume_role_with_web_identity.duration": "",
		"s3lock_lease.lease_duration":                     "",
		"s3lock_lease.renew_before":                       "",
		"s3lock_lease.timeouts.create":                    "fails at once",
		"ephemeral s3lock_lease.lease_duration":           "",
		"ephemeral s3lock_lease.wait_timeout":             "fails at once",
		"state_store s3lock_s3.lease_duration":            "",
		"state_store s3lock_s3.wait_timeout":              "fails at once",
	}
	inputs := durationInputs(t)
	var found []string
	for where := range inputs {
		found = append(found, where)
		if _, ok := zeroMeans[where]; !ok {
			t.Errorf("duration attribute %s is not in the table: say what \"0s\" does", where)
		}
	}
	for where := range zeroMeans {
		if _, ok := inputs[where]; !ok {
			sort.Strings(found)
			t.Errorf("%s is not a duration attribute (found: %s)", where, strings.Join(found, ", "))
		}
	}
	for where, in := range inputs {
		means := zeroMeans[where]
		for _, v := range []string{"0s", "0", "-1s", "-5m"} {
			t.Run(where+"="+v, func(t *testing.T) {
				errs := in.validate(t, v)
				zero := !strings.HasPrefix(v, "-")
				switch {
				case zero && means != "":
					if errs != "" {
						t.Errorf("%s = %q refused: %s; its docs say it %s", where, v, errs, means)
					}
					if want := "`\"0s\"` " + means; !strings.Contains(in.desc, want) {
						t.Errorf("%s: description %q does not say %q", where, in.desc, want)
					}
				case !strings.Contains(errs, "Duration out of range") || !strings.Contains(errs, `= "`+v+`"`) ||
					!strings.Contains(errs, "allowed range ["):
					t.Errorf("%s = %q: %q; want it refused, naming the attribute, the value and the range", where, v, errs)
				}
			})
		}
	}
}

// durationInput is one duration attribute: its description and validators.
type durationInput struct {
	p          path.Path
	config     tfsdk.Config // null: the validators read it for the lock's name
	desc       string
	validators []validator.String
}

// validate runs the attribute's validators on v and returns their errors,
// summary and detail, or "".
func (in durationInput) validate(t *testing.T, v string) string {
	t.Helper()
	var msgs []string
	for _, val := range in.validators {
		var resp validator.StringResponse
		val.ValidateString(t.Context(), validator.StringRequest{Path: in.p, ConfigValue: types.StringValue(v), Config: in.config}, &resp)
		for _, d := range resp.Diagnostics.Errors() {
			msgs = append(msgs, d.Summary()+": "+d.Detail())
		}
	}
	return strings.Join(msgs, "; ")
}

// durationInputs returns every string attribute that has a durationValidator
// or is named like a duration, by "<kind> <type>.<attribute path>".
func durationInputs(t *testing.T) map[string]durationInput {
	t.Helper()
	ctx := context.Background()
	out := map[string]durationInput{}
	p := New("test")()
	var ps provider.SchemaResponse
	p.Schema(ctx, provider.SchemaRequest{}, &ps)
	collectDurations("provider", nullConfig(ctx, tfsdk.Config{Schema: ps.Schema}), path.Empty(), ps.Schema.Attributes, out)
	for _, f := range p.Resources(ctx) {
		r := f()
		var md resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "s3lock"}, &md)
		var s resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &s)
		cfg := nullConfig(ctx, tfsdk.Config{Schema: s.Schema})
		collectDurations(md.TypeName, cfg, path.Empty(), s.Schema.Attributes, out)
		for name, b := range s.Schema.Blocks {
			if nb, ok := b.(resschema.SingleNestedBlock); ok {
				collectDurations(md.TypeName+"."+name, cfg, path.Root(name), nb.Attributes, out)
			}
		}
	}
	for _, f := range p.(provider.ProviderWithEphemeralResources).EphemeralResources(ctx) {
		r := f()
		var md ephemeral.MetadataResponse
		r.Metadata(ctx, ephemeral.MetadataRequest{ProviderTypeName: "s3lock"}, &md)
		var s ephemeral.SchemaResponse
		r.Schema(ctx, ephemeral.SchemaRequest{}, &s)
		collectDurations("ephemeral "+md.TypeName, nullConfig(ctx, tfsdk.Config{Schema: s.Schema}), path.Empty(), s.Schema.Attributes, out)
	}
	for _, f := range p.DataSources(ctx) {
		d := f()
		var md datasource.MetadataResponse
		d.Metadata(ctx, datasource.MetadataRequest{ProviderTypeName: "s3lock"}, &md)
		var s datasource.SchemaResponse
		d.Schema(ctx, datasource.SchemaRequest{}, &s)
		collectDurations("data "+md.TypeName, nullConfig(ctx, tfsdk.Config{Schema: s.Schema}), path.Empty(), s.Schema.Attributes, out)
	}
	for _, f := range p.(provider.ProviderWithStateStores).StateStores(ctx) {
		st := f()
		var md statestore.MetadataResponse
		st.Metadata(ctx, statestore.MetadataRequest{ProviderTypeName: "s3lock"}, &md)
		var s statestore.SchemaResponse
		st.Schema(ctx, statestore.SchemaRequest{}, &s)
		collectDurations("state_store "+md.TypeName, nullConfig(ctx, tfsdk.Config{Schema: s.Schema}), path.Empty(), s.Schema.Attributes, out)
	}
	return out
}

// nullConfig is cfg (its schema) with nothing set.
func nullConfig(ctx context.Context, cfg tfsdk.Config) tfsdk.Config {
	cfg.Raw = tftypes.NewValue(cfg.Schema.Type().TerraformType(ctx), nil)
	return cfg
}

// collectDurations adds the duration attributes of attrs, nested ones
// included, to out.
func collectDurations[A any](prefix string, cfg tfsdk.Config, parent path.Path, attrs map[string]A, out map[string]durationInput) {
	for name, a := range attrs {
		where, p := prefix+"."+name, parent.AtName(name)
		switch n := any(a).(type) {
		case provschema.SingleNestedAttribute:
			collectDurations(where, cfg, p, n.Attributes, out)
		case resschema.SingleNestedAttribute:
			collectDurations(where, cfg, p, n.Attributes, out)
		case ephschema.SingleNestedAttribute:
			collectDurations(where, cfg, p, n.Attributes, out)
		case dsschema.ListNestedAttribute:
			collectDurations(where, cfg, p, n.NestedObject.Attributes, out)
		}
		sv, ok := any(a).(interface{ StringValidators() []validator.String })
		if in, isInput := any(a).(interface {
			IsOptional() bool
			IsRequired() bool
		}); !ok || !isInput || (!in.IsOptional() && !in.IsRequired()) {
			continue // not a string, or an output
		}
		isDuration := false
		for _, v := range sv.StringValidators() {
			_, dv := v.(durationValidator)
			isDuration = isDuration || dv
		}
		for _, word := range []string{"duration", "timeout", "wait", "before", "interval", "create"} {
			isDuration = isDuration || strings.Contains(name, word)
		}
		if !isDuration {
			continue
		}
		d := any(a).(interface {
			GetMarkdownDescription() string
			GetDescription() string
		})
		out[where] = durationInput{p: p, config: cfg, desc: d.GetMarkdownDescription() + d.GetDescription(), validators: sv.StringValidators()}
	}
}
