package provider

// Tests that call the lease resource's methods directly, on the test store,
// where a Terraform run cannot set the situation up (a state without a lease
// token). They belong with resource_lease_test.go.

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/s3lock/terraform-provider-s3lock/internal/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestRenewedSince: Read moves expires_at only when the lease was renewed
// since it was stored, judged at the one-second resolution of expires_at.
func TestRenewedSince(t *testing.T) {
	stored := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		until  time.Time
		stored types.String
		want   bool
	}{
		{name: "same second, fraction dropped in state", until: stored.Add(900 * time.Millisecond), stored: timeValue(stored), want: false},
		{name: "earlier estimate", until: stored.Add(-3 * time.Second), stored: timeValue(stored), want: false},
		{name: "renewed: a later second", until: stored.Add(time.Second), stored: timeValue(stored), want: true},
		{name: "stored value not a time", until: stored, stored: types.StringValue("soon"), want: true},
		{name: "no estimate", until: time.Time{}, stored: types.StringValue("soon"), want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := renewedSince(tc.until, tc.stored); got != tc.want {
				t.Errorf("renewedSince(%s, %s) = %v, want %v", tc.until, tc.stored, got, tc.want)
			}
		})
	}
}

// TestLeaseResource_OverElsewhere: Read and Delete of a state without a lease
// token (written by hand: Adopt checks it) whose lease another handle ended.
// A lease a pipeline step released is deleted quietly; one an operator
// force-released is reported as lost, and Read removes it from state.
func TestLeaseResource_OverElsewhere(t *testing.T) {
	cases := []struct {
		name string
		end  func(t *testing.T, c *s3lock.Client, name string)
		// quietDelete: Delete reports nothing; else the lease-lost warning.
		quietDelete bool
	}{
		{name: "released through another handle", end: func(t *testing.T, c *s3lock.Client, name string) {
			t.Helper()
			l, err := c.Adopt(t.Context(), name, 1, s3lock.WithoutAutoRenew())
			if err == nil {
				err = l.Release(t.Context())
			}
			if err != nil {
				t.Fatal(err)
			}
		}, quietDelete: true},
		{name: "force-released", end: func(t *testing.T, c *s3lock.Client, name string) {
			t.Helper()
			if err := c.ForceRelease(t.Context(), name, 1); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, c, name := newDirectLeaseResource(t)
			tc.end(t, c, name)
			state := directLeaseState(t, r, c.Bucket(), name)

			var read resource.ReadResponse
			read.State = state
			r.Read(t.Context(), resource.ReadRequest{State: state}, &read)
			if read.Diagnostics.HasError() || read.Diagnostics.WarningsCount() != 1 || !read.State.Raw.IsNull() {
				t.Errorf("Read: diagnostics %v, state removed %v; want one warning and the state removed",
					read.Diagnostics, read.State.Raw.IsNull())
			}

			var del resource.DeleteResponse
			r.Delete(t.Context(), resource.DeleteRequest{State: state}, &del)
			switch {
			case del.Diagnostics.HasError():
				t.Errorf("Delete: %v", del.Diagnostics)
			case tc.quietDelete && len(del.Diagnostics) != 0:
				t.Errorf("Delete of a lease already released: %v; want nothing (nothing was lost)", del.Diagnostics)
			case !tc.quietDelete && (del.Diagnostics.WarningsCount() != 1 ||
				!strings.Contains(del.Diagnostics.Warnings()[0].Detail(), "may not have been exclusive")):
				t.Errorf("Delete of a force-released lease: %v; want the lease-lost warning", del.Diagnostics)
			}
		})
	}
}

// newDirectLeaseResource returns the lease resource configured on a fresh
// bucket, for calling its methods directly, an SDK client on that bucket,
// and a lock name whose epoch 1 is held for an hour.
func newDirectLeaseResource(t *testing.T) (*leaseResource, *s3lock.Client, string) {
	t.Helper()
	ns := s3test.New(t)
	opts := []s3lock.Option{s3lock.WithHolder("terraform-test")}
	c, err := s3lock.New(ns.Client, ns.Bucket, opts...)
	if err != nil {
		t.Fatal(err)
	}
	name := ns.Name("direct")
	l, err := c.TryAcquire(t.Context(), name, s3lock.WithoutAutoRenew(), s3lock.WithLeaseFor(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	l.Detach()
	return &leaseResource{factory: &clientFactory{api: ns.Client, options: opts, holder: "terraform-test"}}, c, name
}

// directLeaseState is the state of a lease resource for epoch 1 of name,
// without private state.
func directLeaseState(t *testing.T, r *leaseResource, bucket, name string) tfsdk.State {
	t.Helper()
	var sr resource.SchemaResponse
	r.Schema(t.Context(), resource.SchemaRequest{}, &sr)
	st := tfsdk.State{Schema: sr.Schema, Raw: tftypes.NewValue(sr.Schema.Type().TerraformType(t.Context()), nil)}
	now := time.Now()
	diags := st.Set(t.Context(), &leaseResourceModelV0{
		ID: types.StringValue(leaseID(bucket, name, 1)), Bucket: types.StringValue(bucket), Name: types.StringValue(name),
		LeaseDuration: types.StringValue("1h"), RenewBefore: types.StringNull(), Metadata: types.MapNull(types.StringType),
		Epoch: types.Int64Value(1), Key: types.StringValue(s3lock.Key(name, 1)), Holder: types.StringValue("terraform-test"),
		AcquiredAt: timeValue(now), ExpiresAt: timeValue(now.Add(time.Hour)),
		Timeouts: timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{"create": types.StringType})},
	})
	if diags.HasError() {
		t.Fatalf("state: %v", diags)
	}
	return st
}
