package tfharness_test

import (
	"encoding/json"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
)

// queryOutput is what Terraform 1.15.0 printed for `terraform query -json`
// with one result and a warning (shortened to the fields the parser reads,
// and a message type it ignores).
const queryOutput = `{"@level":"info","@message":"Terraform 1.15.0","type":"version","terraform":"1.15.0","ui":"1.3"}
{"@level":"info","@message":"list.s3lock_lease.held: Starting query...","list_start":{"address":"list.s3lock_lease.held","resource_type":"s3lock_lease"},"type":"list_start"}
{"@level":"info","@message":"list.s3lock_lease.held: Result found","list_resource_found":{"address":"list.s3lock_lease.held","display_name":"deploy/prod epoch 1, held by pipeline-1","identity":{"bucket":"b","epoch":1,"name":"deploy/prod"},"identity_version":0,"resource_type":"s3lock_lease","resource_object":{"bucket":"b","epoch":1,"lease_duration":"1h","metadata":null}},"type":"list_resource_found"}

{"@level":"warn","@message":"Warning: Unreadable lock","diagnostic":{"severity":"warning","summary":"Unreadable lock","detail":"Lock \"x\" in bucket \"b\" is listed as not held"},"type":"diagnostic"}
{"@level":"info","@message":"list.s3lock_lease.held: List complete","list_complete":{"address":"list.s3lock_lease.held","resource_type":"s3lock_lease","total":1},"type":"list_complete"}
`

func TestParseQuery(t *testing.T) {
	out, err := tfharness.ParseQuery([]byte(queryOutput))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 1 || len(out.Diagnostics) != 1 {
		t.Fatalf("ParseQuery = %+v, want one result and one diagnostic", out)
	}
	r := out.Results[0]
	if r.Address != "list.s3lock_lease.held" || r.ResourceType != "s3lock_lease" || r.DisplayName != "deploy/prod epoch 1, held by pipeline-1" {
		t.Errorf("result %+v", r)
	}
	if r.Identity["name"] != "deploy/prod" || r.Identity["epoch"] != json.Number("1") || r.ResourceObject["lease_duration"] != "1h" {
		t.Errorf("identity %v, resource %v", r.Identity, r.ResourceObject)
	}
	if d := out.Diagnostics[0]; d.Severity != "warning" || d.Summary != "Unreadable lock" {
		t.Errorf("diagnostic %+v", d)
	}
	if _, err := tfharness.ParseQuery([]byte("Error: not JSON\n")); err == nil {
		t.Error("ParseQuery of text that is not JSON: no error")
	}
}
