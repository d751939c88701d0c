package provider

import (
	"context"
	"sort"
	"strings"
	"testing"

	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	ephschema "github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	provschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	resschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
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
		"s3lock_lease.max_hold":                           "",
		"s3lock_lease.timeouts.create":                    "fails at once",
		"ephemeral s3lock_lease.lease_duration":           "",
		"ephemeral s3lock_lease.wait_timeout":             "fails at once",
		"ephemeral s3lock_lease.max_hold":                 "",
		"state_store s3lock_s3.lease_duration":            "",
		"state_store s3lock_s3.wait_timeout":              "fails at once",
		"state_store s3lock_s3.max_hold":                  "",
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
	out := map[string]durationInput{}
	for _, ts := range providerSchemas(context.Background()) {
		collectDurations(ts.where, ts.config, path.Empty(), ts.attrs, out)
		for name, b := range ts.blocks {
			collectDurations(ts.where+"."+name, ts.config, path.Root(name), b.attrs, out)
		}
	}
	return out
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
