package provider

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// expectedAttrs are the attributes a data source must show for a lock in
// state st, as s3lock.Client.Current reads it: "" means null (absent).
// expires_at is derived from the time of each read, so it is only checked to
// be present exactly when the lock (the slot) is held.
func expectedAttrs(st s3lock.State) map[string]string {
	m := map[string]string{
		"slots":       strconv.Itoa(max(st.Slots, 1)),
		"holders.#":   strconv.Itoa(len(st.Holders)),
		"held":        strconv.FormatBool(st.Held),
		"released":    strconv.FormatBool(st.Released),
		"epoch":       strconv.FormatUint(st.Epoch, 10),
		"key":         st.Key,
		"holder":      st.Holder,
		"acquired_at": formatTime(st.AcquiredAt),
		"released_at": formatTime(st.ReleasedAt),
		"released_by": st.ReleasedBy,
		"metadata.%":  "",
	}
	if st.Epoch > 0 && st.Slots <= 1 && !st.Shared {
		m["lease_duration"] = formatDuration(st.LeaseDuration)
	}
	// How the lock is held: by nobody (null), by shared holders (also
	// while a writer waits for them), or else exclusively.
	m["pending"] = strconv.FormatBool(st.Pending)
	switch {
	case !st.Held:
		m[modeAttr] = ""
	case st.Shared || st.Pending:
		m[modeAttr] = modeShared
	default:
		m[modeAttr] = modeExclusive
	}
	if len(st.Metadata) > 0 {
		m["metadata.%"] = strconv.Itoa(len(st.Metadata))
		for k, v := range st.Metadata {
			m["metadata."+k] = v
		}
	}
	for i, h := range st.Holders {
		p := fmt.Sprintf("holders.%d.", i)
		m[p+"slot"] = strconv.Itoa(h.Slot)
		m[p+"epoch"] = strconv.FormatUint(h.Epoch, 10)
		m[p+"key"] = h.Key
		m[p+"holder"] = h.Holder
		m[p+"acquired_at"] = formatTime(h.AcquiredAt)
		m[p+"lease_duration"] = formatDuration(h.LeaseDuration)
		m[p+"metadata.%"] = ""
		if len(h.Metadata) > 0 {
			m[p+"metadata.%"] = strconv.Itoa(len(h.Metadata))
			for k, v := range h.Metadata {
				m[p+"metadata."+k] = v
			}
		}
	}
	return m
}

// compareAttrs compares flatmap attributes (under prefix) with want.
func compareAttrs(attrs map[string]string, prefix string, st s3lock.State) error {
	var diffs []string
	for k, v := range expectedAttrs(st) {
		got, ok := attrs[prefix+k]
		if v == "" && !ok {
			continue
		}
		if got != v {
			diffs = append(diffs, fmt.Sprintf("%s%s = %q, Current says %q", prefix, k, got, v))
		}
	}
	if _, ok := attrs[prefix+"expires_at"]; ok != (st.Held && st.Slots <= 1 && !st.Shared) {
		diffs = append(diffs, fmt.Sprintf("%sexpires_at present %v, but held is %v (slots %d)", prefix, ok, st.Held, st.Slots))
	}
	for i := range st.Holders {
		if _, ok := attrs[fmt.Sprintf("%sholders.%d.expires_at", prefix, i)]; !ok {
			diffs = append(diffs, fmt.Sprintf("%sholders.%d.expires_at is null, but the slot is held", prefix, i))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s", strings.Join(diffs, "\n"))
	}
	return nil
}

// checkDataMatchesCurrent compares a data source with Current.
func checkDataMatchesCurrent(t *testing.T, e *accEnv, addr, name string) tfresource.TestCheckFunc {
	t.Helper()
	return func(s *terraform.State) error {
		rs, ok := s.RootModule().Resources[addr]
		if !ok {
			return fmt.Errorf("%s is not in state", addr)
		}
		return compareAttrs(rs.Primary.Attributes, "", e.current(t, name))
	}
}

// TestAccLeaseDataSource_MatchesCurrent: the data source reads what the SDK
// reads for held, released, force-released, lapsed and never-existing locks.
func TestAccLeaseDataSource_MatchesCurrent(t *testing.T) {
	e := newAccEnv(t)
	cases := []struct {
		name  string
		setup func(t *testing.T, name string)
		check func(st s3lock.State) error // what the case is about
	}{
		{
			name: "held",
			setup: func(t *testing.T, name string) {
				t.Helper()
				e.hold(t, "deployer", name, time.Hour, s3lock.WithMetadata(map[string]string{"change": "CHG-7", "env": "prod"}))
			},
			check: func(st s3lock.State) error {
				if !st.Held || st.Epoch != 1 || st.Metadata["change"] != "CHG-7" {
					return fmt.Errorf("not held with metadata: %+v", st)
				}
				return nil
			},
		},
		{
			name: "released",
			setup: func(t *testing.T, name string) {
				t.Helper()
				for range 2 {
					if err := e.hold(t, "deployer", name, time.Hour).Release(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
			},
			check: func(st s3lock.State) error {
				if st.Held || !st.Released || st.Epoch != 2 {
					return fmt.Errorf("not released at epoch 2: %+v", st)
				}
				return nil
			},
		},
		{
			name: "force-released",
			setup: func(t *testing.T, name string) {
				t.Helper()
				e.hold(t, "crashed", name, time.Hour)
				if err := e.sdk(t, "operator").ForceRelease(t.Context(), s3lock.Token{Name: name, Epoch: 1}); err != nil {
					t.Fatal(err)
				}
			},
			check: func(st s3lock.State) error {
				if st.Held || !st.Released || st.ReleasedBy != "operator" {
					return fmt.Errorf("not force-released by operator: %+v", st)
				}
				return nil
			},
		},
		{
			name: "lapsed",
			setup: func(t *testing.T, name string) {
				t.Helper()
				e.hold(t, "vanished", name, s3lock.MinLeaseDuration).Detach()
				e.waitLapsed(t, name)
			},
			check: func(st s3lock.State) error {
				if st.Held || st.Released || st.Epoch != 1 {
					return fmt.Errorf("not lapsed: %+v", st)
				}
				return nil
			},
		},
		{
			name:  "never existed",
			setup: func(*testing.T, string) {},
			check: func(st s3lock.State) error {
				if st.Held || st.Released || st.Epoch != 0 {
					return fmt.Errorf("exists: %+v", st)
				}
				return nil
			},
		},
	}
	var config strings.Builder
	config.WriteString(e.providerConfig(nil))
	var checks []tfresource.TestCheckFunc
	for i, tc := range cases {
		name := e.name("ds/" + strings.ReplaceAll(tc.name, " ", "-"))
		addr := fmt.Sprintf("data.s3lock_lease.c%d", i)
		fmt.Fprintf(&config, "\ndata \"s3lock_lease\" \"c%d\" {\n  bucket = %q\n  name   = %q\n}\n", i, e.bucket, name)
		checks = append(checks,
			func(*terraform.State) error {
				if err := tc.check(e.current(t, name)); err != nil {
					return fmt.Errorf("case %s: the setup did not work: %w", tc.name, err)
				}
				return nil
			},
			checkDataMatchesCurrent(t, e, addr, name),
		)
		tc.setup(t, name)
	}
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			Config: config.String(),
			Check:  tfresource.ComposeAggregateTestCheckFunc(checks...),
		}},
	})
}

// TestAccLeaseDataSource_SlotHolders: for a lock that admits several
// holders, both data sources show how many it admits and its held slots,
// each with its epoch, key, holder, expiry and metadata, as
// s3lock.Client.Current reads them; the lock's own attributes are its
// marker's; a mutex admits 1 and lists no holders.
func TestAccLeaseDataSource_SlotHolders(t *testing.T) {
	e := newAccEnv(t)
	prefix := e.name("pool/")
	runners, mutex, free := prefix+"runners", prefix+"mutex", prefix+"runners-free"
	e.hold(t, "runner-a", runners, time.Hour, s3lock.WithSlots(3), s3lock.WithMetadata(map[string]string{"job": "build"}))
	e.hold(t, "runner-b", runners, 30*time.Minute, s3lock.WithSlots(3))
	e.hold(t, "deployer", mutex, time.Hour)
	if err := e.hold(t, "runner-c", free, time.Hour, s3lock.WithSlots(2)).Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	config := e.providerConfig(nil) + fmt.Sprintf(`
data "s3lock_lease" "runners" {
  bucket = %q
  name   = %q
}

data "s3lock_lease" "free" {
  bucket = %q
  name   = %q
}

data "s3lock_leases" "pool" {
  bucket = %q
  prefix = %q
}
`, e.bucket, runners, e.bucket, free, e.bucket, prefix)
	check := func(*terraform.State) error {
		st := e.current(t, runners)
		switch {
		case st.Slots != 3 || len(st.Holders) != 2 || !st.Held:
			return fmt.Errorf("the setup did not work: %q is %+v", runners, st)
		case st.Holders[0].Slot >= st.Holders[1].Slot:
			return fmt.Errorf("Current's holders are not sorted by slot: %+v", st.Holders)
		}
		return nil
	}
	entry := func(i int, name string) tfresource.TestCheckFunc {
		return func(s *terraform.State) error {
			a := s.RootModule().Resources["data.s3lock_leases.pool"].Primary.Attributes
			p := fmt.Sprintf("leases.%d.", i)
			if a[p+"name"] != name {
				return fmt.Errorf("%sname = %q, want %q", p, a[p+"name"], name)
			}
			return compareAttrs(a, p, e.current(t, name))
		}
	}
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			Config: config,
			Check: tfresource.ComposeAggregateTestCheckFunc(
				check,
				checkDataMatchesCurrent(t, e, "data.s3lock_lease.runners", runners),
				checkDataMatchesCurrent(t, e, "data.s3lock_lease.free", free),
				tfresource.TestCheckResourceAttr("data.s3lock_lease.runners", "slots", "3"),
				tfresource.TestCheckResourceAttr("data.s3lock_lease.runners", "holders.#", "2"),
				tfresource.TestCheckResourceAttr("data.s3lock_lease.runners", "held", "true"),
				tfresource.TestCheckNoResourceAttr("data.s3lock_lease.runners", "holder"),
				tfresource.TestCheckNoResourceAttr("data.s3lock_lease.runners", "lease_duration"),
				tfresource.TestCheckResourceAttr("data.s3lock_lease.free", "slots", "2"),
				tfresource.TestCheckResourceAttr("data.s3lock_lease.free", "holders.#", "0"),
				tfresource.TestCheckResourceAttr("data.s3lock_lease.free", "held", "false"),
				tfresource.TestCheckResourceAttr("data.s3lock_leases.pool", "leases.#", "3"),
				entry(0, mutex),
				entry(1, runners),
				entry(2, free),
				tfresource.TestCheckResourceAttr("data.s3lock_leases.pool", "leases.0.slots", "1"),
				tfresource.TestCheckResourceAttr("data.s3lock_leases.pool", "leases.0.holders.#", "0"),
			),
		}},
	})
}

// TestAccLeaseDataSource_Waiters: the data source lists who waits for the
// lock in its line, in the order they will be served, as s3lock.Client.Line
// reads it; s3lock_leases counts them per held lock.
func TestAccLeaseDataSource_Waiters(t *testing.T) {
	e := newAccEnv(t)
	prefix := e.name("ds/")
	busy, quiet := prefix+"busy", prefix+"quiet"
	e.hold(t, "deployer", busy, time.Hour)
	e.hold(t, "deployer", quiet, time.Hour)
	// Three pipeline runs queue one after the other.
	queued := []struct {
		holder string
		order  s3lock.Order
		meta   map[string]string
	}{
		{holder: "pipeline 41", order: s3lock.OrderFIFO, meta: map[string]string{"commit": "c41"}},
		{holder: "pipeline 42", order: s3lock.OrderNewest},
		{holder: "pipeline 43", order: s3lock.OrderFIFO},
	}
	for _, q := range queued {
		opts := []s3lock.Option{s3lock.WithOrder(q.order)}
		if q.meta != nil {
			opts = append(opts, s3lock.WithMetadata(q.meta))
		}
		if err := e.queue(q.holder, busy, opts...); err != nil {
			t.Fatal(err)
		}
	}
	line, err := e.line(busy)
	if err != nil || len(line) != len(queued) {
		t.Fatalf("the line of %q is %+v (%v); want the %d queued runs", busy, line, err, len(queued))
	}
	var want []knownvalue.Check
	for i, q := range queued {
		var meta knownvalue.Check = knownvalue.Null()
		if q.meta != nil {
			meta = knownvalue.MapExact(map[string]knownvalue.Check{"commit": knownvalue.StringExact(q.meta["commit"])})
		}
		want = append(want, knownvalue.ObjectExact(map[string]knownvalue.Check{
			"position": knownvalue.Int64Exact(int64(i + 1)),
			"holder":   knownvalue.StringExact(q.holder),
			"order":    knownvalue.StringExact(string(q.order)),
			"key":      knownvalue.StringExact(line[i].Key),
			"joined_at": knownvalue.StringFunc(func(v string) error {
				_, err := time.Parse(time.RFC3339, v)
				return err
			}),
			"metadata": meta,
		}))
	}
	config := e.providerConfig(nil) + fmt.Sprintf(`
data "s3lock_lease" "busy" {
  bucket = %q
  name   = %q
}

data "s3lock_lease" "quiet" {
  bucket = %q
  name   = %q
}

data "s3lock_leases" "all" {
  bucket = %q
  prefix = %q
}
`, e.bucket, busy, e.bucket, quiet, e.bucket, prefix)
	count := func(i int) tfjsonpath.Path {
		return tfjsonpath.New("leases").AtSliceIndex(i).AtMapKey("waiter_count")
	}
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.s3lock_lease.busy", tfjsonpath.New("waiters"), knownvalue.ListExact(want)),
				statecheck.ExpectKnownValue("data.s3lock_lease.quiet", tfjsonpath.New("waiters"), knownvalue.ListExact(nil)),
				statecheck.ExpectKnownValue("data.s3lock_leases.all", count(0), knownvalue.Int64Exact(int64(len(queued)))),
				statecheck.ExpectKnownValue("data.s3lock_leases.all", count(1), knownvalue.Int64Exact(0)),
			},
		}},
	})
}
