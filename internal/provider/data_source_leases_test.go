package provider

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// TestAccLeasesDataSource_Prefix: the data source lists every lock under the
// prefix, sorted by name, each as s3lock.Client.Current reads it, and
// nothing outside the prefix.
func TestAccLeasesDataSource_Prefix(t *testing.T) {
	e := newAccEnv(t)
	prefix := e.name("team/")
	inside := []string{prefix + "a", prefix + "b", prefix + "c/deep"}
	outside := e.name("other/x")

	e.hold(t, "alice", inside[0], time.Hour, s3lock.WithMetadata(map[string]string{"ticket": "T-1"}))
	if err := e.hold(t, "bob", inside[1], time.Hour).Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.hold(t, "carol", inside[2], time.Hour)
	e.hold(t, "dave", outside, time.Hour)

	config := e.providerConfig(nil) + fmt.Sprintf(`
data "s3lock_leases" "team" {
  bucket = %q
  prefix = %q
}

data "s3lock_leases" "all" {
  bucket = %q
}
`, e.bucket, prefix, e.bucket)

	checkList := func(addr string, names []string) tfresource.TestCheckFunc {
		return func(s *terraform.State) error {
			rs, ok := s.RootModule().Resources[addr]
			if !ok {
				return fmt.Errorf("%s is not in state", addr)
			}
			a := rs.Primary.Attributes
			if a["leases.#"] != strconv.Itoa(len(names)) {
				return fmt.Errorf("%s lists %s locks, want %d", addr, a["leases.#"], len(names))
			}
			for i, n := range names {
				p := fmt.Sprintf("leases.%d.", i)
				if a[p+"name"] != n {
					return fmt.Errorf("%s %sname = %q, want %q", addr, p, a[p+"name"], n)
				}
				if err := compareAttrs(a, p, e.current(t, n)); err != nil {
					return fmt.Errorf("%s: %w", addr, err)
				}
			}
			return nil
		}
	}
	all := append(append([]string{}, outside), inside...)
	if outside > inside[0] {
		all = append(append([]string{}, inside...), outside)
	}
	tfresource.ParallelTest(t, tfresource.TestCase{
		ProtoV6ProviderFactories: e.protoV6Factories(),
		Steps: []tfresource.TestStep{{
			Config: config,
			Check: tfresource.ComposeAggregateTestCheckFunc(
				checkList("data.s3lock_leases.team", inside),
				checkList("data.s3lock_leases.all", all),
			),
		}},
	})
}
