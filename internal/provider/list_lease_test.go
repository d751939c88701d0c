package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/querycheck"
	"github.com/hashicorp/terraform-plugin-testing/querycheck/queryfilter"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// listConfig is a list "s3lock_lease" block named held; extra holds further
// arguments of the block (raw HCL lines), and prefix is left out when "".
func listConfig(bucket, prefix string, extra ...string) string {
	var b strings.Builder
	b.WriteString("list \"s3lock_lease\" \"held\" {\n  provider = s3lock\n")
	for _, l := range extra {
		b.WriteString("  " + l + "\n")
	}
	fmt.Fprintf(&b, "  config {\n    bucket = %q\n", bucket)
	if prefix != "" {
		fmt.Fprintf(&b, "    prefix = %q\n", prefix)
	}
	b.WriteString("  }\n}\n")
	return b.String()
}

// leaseIdentityCheck is the identity of a mutex's lease, for query and state
// checks: it has no slot and no share.
func leaseIdentityCheck(bucket, name string, epoch int64) map[string]knownvalue.Check {
	return map[string]knownvalue.Check{
		"bucket": knownvalue.StringExact(bucket),
		"name":   knownvalue.StringExact(name),
		"epoch":  knownvalue.Int64Exact(epoch),
		"slot":   knownvalue.Null(),
		"share":  knownvalue.Null(),
	}
}

// slotLeaseIdentityCheck is the identity of the lease of a slot.
func slotLeaseIdentityCheck(bucket, name string, slot int, epoch uint64) map[string]knownvalue.Check {
	c := leaseIdentityCheck(bucket, name, int64(epoch))
	c["slot"] = knownvalue.Int64Exact(int64(slot))
	return c
}

// TestAccLeaseList_Query: terraform query lists the held leases under the
// prefix, with their identities and, with include_resource, their
// attributes, and each held slot of a lock that admits several holders as a
// lease of its own; free, released and lapsed locks and locks outside the
// prefix are left out, and limit caps the results (Terraform 1.14 and
// later).
func TestAccLeaseList_Query(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, tfharness.ListResources)
	prefix := e.name("deploy/")
	prod, stage, released, lapsed := prefix+"prod", prefix+"stage", prefix+"old", prefix+"lapsed"
	runners := prefix + "runners"
	e.hold(t, "pipeline-1", prod, 2*time.Hour, s3lock.WithMetadata(map[string]string{"run": "42"}))
	slotA := e.hold(t, "runner-a", runners, time.Hour, s3lock.WithSlots(3), s3lock.WithMetadata(map[string]string{"job": "7"}))
	slotB := e.hold(t, "runner-b", runners, time.Hour, s3lock.WithSlots(3))
	// stage is at epoch 2.
	if err := e.hold(t, "pipeline-0", stage, time.Hour).Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.hold(t, "pipeline-2", stage, time.Hour)
	if err := e.hold(t, "pipeline-0", released, time.Hour).Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.hold(t, "pipeline-x", lapsed, s3lock.MinLeaseDuration)
	e.hold(t, "someone", e.name("other/x"), time.Hour)
	e.waitLapsed(t, lapsed)

	held := "s3lock_lease.held"
	prodOnly := queryfilter.ByResourceIdentity(leaseIdentityCheck(e.bucket, prod, 1))
	slotAOnly := queryfilter.ByResourceIdentity(slotLeaseIdentityCheck(e.bucket, runners, slotA.Token().Slot, slotA.Token().Epoch))
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{
			{Config: e.providerConfig(nil)}, // the configuration the queries run in
			{
				Query:  true,
				Config: listConfig(e.bucket, prefix, "include_resource = true"),
				QueryResultChecks: []querycheck.QueryResultCheck{
					querycheck.ExpectLength(held, 4),
					querycheck.ExpectIdentity(held, leaseIdentityCheck(e.bucket, prod, 1)),
					querycheck.ExpectIdentity(held, leaseIdentityCheck(e.bucket, stage, 2)),
					querycheck.ExpectIdentity(held, slotLeaseIdentityCheck(e.bucket, runners, slotA.Token().Slot, slotA.Token().Epoch)),
					querycheck.ExpectIdentity(held, slotLeaseIdentityCheck(e.bucket, runners, slotB.Token().Slot, slotB.Token().Epoch)),
					querycheck.ExpectResourceDisplayName(held, slotAOnly, knownvalue.StringExact(
						fmt.Sprintf("%s slot %d of 3, epoch 1, held by runner-a", runners, slotA.Token().Slot))),
					querycheck.ExpectResourceKnownValues(held, slotAOnly, []querycheck.KnownValueCheck{
						{Path: tfjsonpath.New("id"), KnownValue: knownvalue.StringExact(leaseID(e.bucket, runners, slotA.Token().Slot, 1))},
						{Path: tfjsonpath.New("slots"), KnownValue: knownvalue.Int64Exact(3)},
						{Path: tfjsonpath.New("slot"), KnownValue: knownvalue.Int64Exact(int64(slotA.Token().Slot))},
						{Path: tfjsonpath.New("holder"), KnownValue: knownvalue.StringExact("runner-a")},
						{Path: tfjsonpath.New("key"), KnownValue: knownvalue.StringExact(slotA.Token().Key())},
						{Path: tfjsonpath.New("lease_duration"), KnownValue: knownvalue.StringExact("1h")},
						{Path: tfjsonpath.New("metadata"), KnownValue: knownvalue.MapExact(map[string]knownvalue.Check{
							"job": knownvalue.StringExact("7")})},
					}),
					querycheck.ExpectResourceDisplayName(held, prodOnly, knownvalue.StringExact(prod+" epoch 1, held by pipeline-1")),
					querycheck.ExpectResourceKnownValues(held, prodOnly, []querycheck.KnownValueCheck{
						{Path: tfjsonpath.New("id"), KnownValue: knownvalue.StringExact(leaseID(e.bucket, prod, 0, 1))},
						{Path: tfjsonpath.New("holder"), KnownValue: knownvalue.StringExact("pipeline-1")},
						{Path: tfjsonpath.New("key"), KnownValue: knownvalue.StringExact(s3lock.Token{Name: prod, Epoch: 1}.Key())},
						{Path: tfjsonpath.New("lease_duration"), KnownValue: knownvalue.StringExact("2h")},
						{Path: tfjsonpath.New("metadata"), KnownValue: knownvalue.MapExact(map[string]knownvalue.Check{
							"run": knownvalue.StringExact("42")})},
						{Path: tfjsonpath.New("order"), KnownValue: knownvalue.StringExact("fifo")},
						{Path: tfjsonpath.New("slots"), KnownValue: knownvalue.Int64Exact(1)},
						{Path: tfjsonpath.New("slot"), KnownValue: knownvalue.Int64Exact(0)},
					}),
				},
			},
			{
				// The whole bucket, at most one result: the first by name.
				Query:  true,
				Config: listConfig(e.bucket, "", "limit = 1"),
				QueryResultChecks: []querycheck.QueryResultCheck{
					querycheck.ExpectLength(held, 1),
					querycheck.ExpectIdentity(held, leaseIdentityCheck(e.bucket, prod, 1)),
				},
			},
			{
				// The slots count as leases against the limit.
				Query:  true,
				Config: listConfig(e.bucket, prefix+"r", "limit = 1"),
				QueryResultChecks: []querycheck.QueryResultCheck{
					querycheck.ExpectLength(held, 1),
					querycheck.ExpectIdentity(held, slotLeaseIdentityCheck(e.bucket, runners,
						min(slotA.Token().Slot, slotB.Token().Slot), 1)),
				},
			},
		},
	})
}

// TestAccLeaseList_GenerateConfigImportsCleanly: `terraform query
// -generate-config-out` writes a resource and an import block (by identity)
// for every held lease, each held slot of a lock that admits several
// holders included; the plan of that configuration imports them and changes
// nothing, the imported state is what the query listed, and destroy releases
// the leases (Terraform 1.14 and later).
func TestAccLeaseList_GenerateConfigImportsCleanly(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, tfharness.ListResources)
	prefix := e.name("pipeline/")
	leases := map[string]*s3lock.Lease{
		prefix + "migrate": e.hold(t, "pipeline-step-1", prefix+"migrate", 2*time.Hour,
			s3lock.WithMetadata(map[string]string{"run": "42", "change": "CHG-7"})),
		prefix + "deploy": e.hold(t, "pipeline-step-2", prefix+"deploy", 90*time.Minute),
	}
	// Two of the three slots of a pool of runners, by their lease keys.
	runners := prefix + "runners"
	for _, who := range []string{"runner-a", "runner-b"} {
		l := e.hold(t, who, runners, time.Hour, s3lock.WithSlots(3), s3lock.WithMetadata(map[string]string{"runner": who}))
		leases[l.Token().Key()] = l
	}
	h, dir := cliWorkdir(t, e, "", tfharness.ListResources)
	// The documented example, on the test's bucket.
	writeWorkFile(t, dir, "leases.tfquery.hcl", example(t, "list-resources/s3lock_lease/list-resource.tfquery.hcl",
		`"acme-locks"`, fmt.Sprintf("%q", e.bucket), `"pipeline/"`, fmt.Sprintf("%q", prefix)))

	found, err := h.Query(t.Context(), dir, "-generate-config-out=imports.tf")
	if err != nil {
		t.Fatal(err)
	}
	if len(found.Results) != len(leases) {
		t.Fatalf("query found %d leases, want %d: %+v", len(found.Results), len(leases), found.Results)
	}
	generated, err := os.ReadFile(filepath.Join(dir, "imports.tf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generated configuration:\n%s", generated)
	if n := strings.Count(string(generated), "import {"); n != len(leases) {
		t.Errorf("the generated configuration has %d import blocks, want %d", n, len(leases))
	}

	out, err := h.Run(t.Context(), dir, "apply", "-auto-approve", "-input=false", "-no-color")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if want := fmt.Sprintf("Resources: %d imported, 0 added, 0 changed, 0 destroyed.", len(leases)); !strings.Contains(out, want) {
		t.Errorf("apply of the generated configuration did not say %q:\n%s", want, out)
	}
	// A second plan has nothing to do: the generated arguments are the
	// imported state's.
	if out, err := h.Run(t.Context(), dir, "plan", "-detailed-exitcode", "-input=false", "-no-color"); err != nil {
		t.Errorf("plan after the import: %v (exit code 2: changes)\n%s", err, out)
	}

	imported := showResources(t, h, dir)
	for _, r := range found.Results {
		name, _ := r.Identity["name"].(string)
		key, _ := r.ResourceObject["key"].(string)
		l, ok := leases[name]
		if !ok {
			l, ok = leases[key]
			name = key
		}
		if !ok {
			t.Errorf("query found %v, which is not a lease of the test", r.Identity)
			continue
		}
		want := map[string]any{"bucket": e.bucket, "name": l.Token().Name, "epoch": json.Number(fmt.Sprint(l.Token().Epoch)), "slot": nil, "share": nil}
		if l.Token().Slot > 0 {
			want["slot"] = json.Number(fmt.Sprint(l.Token().Slot))
		}
		if !reflect.DeepEqual(r.Identity, want) {
			t.Errorf("query identity %v, want %v", r.Identity, want)
		}
		got, ok := imported[name]
		switch {
		case !ok:
			t.Errorf("lease %q was not imported", name)
		case !reflect.DeepEqual(got.Identity, r.Identity):
			t.Errorf("lease %q imported with identity %v, listed with %v", name, got.Identity, r.Identity)
		case !sameLeaseValues(got.Values, r.ResourceObject):
			t.Errorf("lease %q imported as\n  %v\nbut listed as\n  %v", name, got.Values, r.ResourceObject)
		}
	}

	if out, err := h.Run(t.Context(), dir, "destroy", "-auto-approve", "-input=false", "-no-color"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for name, l := range leases {
		if l.Token().Slot > 0 {
			_, err := e.sdk(t, "observer").Lookup(t.Context(), s3lock.Token{Name: l.Token().Name, Slot: l.Token().Slot, Epoch: l.Token().Epoch})
			if !leaseReleased(err) {
				t.Errorf("after destroy, slot %d of %q: %v; want epoch %d released", l.Token().Slot, l.Token().Name, err, l.Token().Epoch)
			}
			continue
		}
		if st := e.current(t, name); st.Epoch != l.Token().Epoch || !st.Released {
			t.Errorf("after destroy, lock %q is %s at epoch %d; want epoch %d released", name, st.Phase(), st.Epoch, l.Token().Epoch)
		}
	}
}

// sameLeaseValues reports whether a lease's state as imported matches its
// state as listed. expires_at is the time the lease is trusted until, which
// the listing and the import each estimate from the store's clock and their
// own round trips: it need only lie within the lease in both.
func sameLeaseValues(imported, listed map[string]any) bool {
	a, b := copyMap(imported), copyMap(listed)
	if !expiresWithinLease(a) || !expiresWithinLease(b) {
		return false
	}
	delete(a, "expires_at")
	delete(b, "expires_at")
	return reflect.DeepEqual(a, b)
}

// expiresWithinLease reports whether a lease state's expires_at is after its
// acquired_at and no later than acquired_at plus lease_duration.
func expiresWithinLease(v map[string]any) bool {
	acquired, err1 := time.Parse(time.RFC3339, fmt.Sprint(v["acquired_at"]))
	expires, err2 := time.Parse(time.RFC3339, fmt.Sprint(v["expires_at"]))
	dur, err3 := time.ParseDuration(fmt.Sprint(v["lease_duration"]))
	return errors.Join(err1, err2, err3) == nil && expires.After(acquired) && !expires.After(acquired.Add(dur))
}

// copyMap copies m.
func copyMap(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// shownResource is a resource in `terraform show -json`.
type shownResource struct {
	Values   map[string]any `json:"values"`
	Identity map[string]any `json:"identity"`
}

// showResources returns the s3lock_lease resources in the state of dir, by
// lock name (by key, for the lease of a slot).
func showResources(t *testing.T, h *tfharness.Harness, dir string) map[string]shownResource {
	t.Helper()
	cmd := h.Command(t.Context(), dir, "show", "-json")
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("show -json: %v", err)
	}
	var state struct {
		Values struct {
			RootModule struct {
				Resources []shownResource `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&state); err != nil {
		t.Fatalf("show -json: %v\n%s", err, raw)
	}
	out := map[string]shownResource{}
	for _, r := range state.Values.RootModule.Resources {
		name, _ := r.Values["name"].(string)
		if slot, _ := r.Values["slot"].(json.Number); slot != "" && slot != "0" {
			name, _ = r.Values["key"].(string)
		}
		out[name] = r
	}
	return out
}

// TestAccLeaseList_Diagnostics: what terraform query reports when a listing
// cannot be made, or a lock cannot be read (Terraform 1.14 and later).
func TestAccLeaseList_Diagnostics(t *testing.T) {
	e := newAccEnv(t)
	requireCLI(t, tfharness.ListResources)
	prefix := e.name("diag/")
	e.hold(t, "pipeline-1", prefix+"held", time.Hour)
	unreadable := prefix + "garbled"
	if _, err := e.ns.Client.PutObject(t.Context(), &s3.PutObjectInput{
		Bucket: aws.String(e.bucket), Key: aws.String(s3lock.Token{Name: unreadable, Epoch: 1}.Key()), Body: strings.NewReader("not a lease"),
	}); err != nil {
		t.Fatal(err)
	}
	down := e.providerBlock(map[string]string{"alias": `"down"`, "endpoints": `{ s3 = "http://127.0.0.1:1" }`, "max_retries": "0"})
	h, dir := cliWorkdir(t, e, down, tfharness.ListResources)

	cases := []struct {
		name  string
		query string
		// failure is a diagnostic the query fails with, "" if it must not fail.
		failure []string
		// warning is a warning the query prints.
		warning []string
		// found are the lock names the query lists.
		found []string
	}{
		{
			name:    "unreadable lock",
			query:   listConfig(e.bucket, prefix),
			warning: []string{"Unreadable lock", fmt.Sprintf("Lock %q in bucket %q", unreadable, e.bucket)},
			found:   []string{prefix + "held"},
		},
		{
			name:    "prefix with a leading slash",
			query:   listConfig(e.bucket, "/abs"),
			failure: []string{"Invalid prefix", `Prefix "/abs"`, "starts with a slash"},
		},
		{
			name:    "bad bucket",
			query:   listConfig("Not_A_Bucket", ""),
			failure: []string{"Invalid bucket name", "Not_A_Bucket"},
		},
		{
			name:    "missing bucket",
			query:   listConfig("s3lock-no-such-bucket", ""),
			failure: []string{"Could not list locks", `bucket "s3lock-no-such-bucket"`, "does not exist"},
		},
		{
			name:    "unreachable endpoint",
			query:   strings.Replace(listConfig(e.bucket, prefix), "provider = s3lock\n", "provider = s3lock.down\n", 1),
			failure: []string{"Could not list locks", fmt.Sprintf("bucket %q", e.bucket), "connection refused"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			writeWorkFile(t, dir, "leases.tfquery.hcl", tc.query)
			out, err := h.Query(t.Context(), dir)
			if (err != nil) != (tc.failure != nil) {
				t.Fatalf("query: error %v, want failure %v; diagnostics %v", err, tc.failure != nil, out.Diagnostics)
			}
			for _, want := range [][]string{tc.failure, tc.warning} {
				if want != nil && !hasDiagnostic(out.Diagnostics, want) {
					t.Errorf("no diagnostic with %q among %v", want, out.Diagnostics)
				}
			}
			var names []string
			for _, r := range out.Results {
				names = append(names, fmt.Sprint(r.Identity["name"]))
			}
			if !reflect.DeepEqual(names, tc.found) {
				t.Errorf("query found %v, want %v", names, tc.found)
			}
		})
	}
}

// hasDiagnostic reports whether one of diags mentions every part of want
// (the summary, then parts of the detail; white space as the CLI wraps it).
func hasDiagnostic(diags []tfharness.Diagnostic, want []string) bool {
	for _, d := range diags {
		if matchError(append([]string(nil), want...)...).MatchString(d.Summary + "\n" + d.Detail) {
			return true
		}
	}
	return false
}

// TestLeaseList_HeldLeasesUpToLimit: List returns the held mutexes and each
// held slot of a slot lock, and stops at the limit Terraform gives (each
// slot counts), and when Terraform stops reading. (Terraform also cuts the
// results at its limit, so the acceptance tests cannot tell whether the
// provider does.)
func TestLeaseList_HeldLeasesUpToLimit(t *testing.T) {
	ns := s3test.New(t)
	sdk, err := s3lock.New(ns.Client, ns.Bucket, s3lock.WithHolder("pipeline"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{ns.Name("a"), ns.Name("b"), ns.Name("c")}
	for _, n := range names {
		l, err := sdk.TryAcquire(t.Context(), n, s3lock.WithoutAutoRenew(), s3lock.WithLeaseDuration(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Release(context.Background()) })
	}
	var slots []int
	for range 2 {
		l, err := sdk.TryAcquire(t.Context(), ns.Name("d-slots"), s3lock.WithoutAutoRenew(), s3lock.WithLeaseDuration(time.Hour), s3lock.WithSlots(3))
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, l.Token().Slot)
		t.Cleanup(func() { _ = l.Release(context.Background()) })
	}
	slices.Sort(slots)
	for _, slot := range slots {
		names = append(names, fmt.Sprintf("%s slot %d", ns.Name("d-slots"), slot))
	}
	l := &leaseListResource{factory: &clientFactory{api: ns.Client, options: []s3lock.Option{s3lock.WithHolder("lister")}}}
	listed := func(t *testing.T, limit int64, take int) []string {
		t.Helper()
		var stream list.ListResultsStream
		l.List(t.Context(), directListRequest(t, ns.Bucket, ns.Name(""), limit), &stream)
		var got []string
		for r := range stream.Results {
			if r.Diagnostics.HasError() {
				t.Fatalf("List: %v", r.Diagnostics)
			}
			var id leaseIdentityModelV0
			if d := r.Identity.Get(t.Context(), &id); d.HasError() {
				t.Fatal(d)
			}
			n := id.Name.ValueString()
			if !id.Slot.IsNull() {
				n = fmt.Sprintf("%s slot %d", n, id.Slot.ValueInt64())
			}
			got = append(got, n)
			if len(got) == take {
				break
			}
		}
		return got
	}
	cases := []struct {
		name  string
		limit int64
		take  int // results read before stopping; 0: all
		want  []string
	}{
		{name: "no limit", want: names},
		{name: "limit", limit: 2, want: names[:2]},
		{name: "limit among the slots", limit: 4, want: names[:4]},
		{name: "limit above the count", limit: 10, want: names},
		{name: "reader stops", take: 1, want: names[:1]},
		{name: "reader stops among the slots", take: 4, want: names[:4]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := listed(t, tc.limit, tc.take); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
		})
	}
}

// directListRequest is the request Terraform sends for a list block on
// bucket and prefix, with the resource's schemas.
func directListRequest(t *testing.T, bucket, prefix string, limit int64) list.ListRequest {
	t.Helper()
	ctx := t.Context()
	var ls list.ListResourceSchemaResponse
	(&leaseListResource{}).ListResourceConfigSchema(ctx, list.ListResourceSchemaRequest{}, &ls)
	var rs resource.SchemaResponse
	(&leaseResource{}).Schema(ctx, resource.SchemaRequest{}, &rs)
	cfg := tftypes.NewValue(ls.Schema.Type().TerraformType(ctx), map[string]tftypes.Value{
		"bucket": tftypes.NewValue(tftypes.String, bucket),
		"prefix": tftypes.NewValue(tftypes.String, prefix),
	})
	return list.ListRequest{
		Config:                 tfsdk.Config{Schema: ls.Schema, Raw: cfg},
		Limit:                  limit,
		IncludeResource:        true,
		ResourceSchema:         rs.Schema,
		ResourceIdentitySchema: leaseIdentitySchema(),
	}
}
