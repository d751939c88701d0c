package provider

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/s3lock/terraform-provider-s3lock/s3lock"
)

// privateMap is private data as Terraform keeps it between Open, Renew and
// Close: JSON values only.
type privateMap map[string][]byte

func (p privateMap) GetKey(_ context.Context, key string) ([]byte, diag.Diagnostics) {
	return p[key], nil
}

func (p privateMap) SetKey(_ context.Context, key string, value []byte) diag.Diagnostics {
	if !json.Valid(value) {
		return diag.Diagnostics{diag.NewErrorDiagnostic("JSON Invalid", "key "+key+": "+string(value))}
	}
	p[key] = value
	return nil
}

// TestLeaseLife_OpenChoosesRenewAndCloseFollow: the lifecycle Open chose is
// the one Renew and Close get back from the private data, with the lease it
// names, for each of the three; private data without one (Terraform did not
// pass it back) is "Missing lease token", never a lifecycle guessed.
func TestLeaseLife_OpenChoosesRenewAndCloseFollow(t *testing.T) {
	e := &leaseEphemeralResource{}
	token := s3lock.Token{Bucket: "b", Name: "deploy/prod", Epoch: 7, Nonce: "n"}
	slot := s3lock.Token{Bucket: "b", Name: "ci/runners", Slot: 2, Slots: 3, Epoch: 9, Nonce: "m"}
	in := inheritedLease{Bucket: "b", Name: "deploy/prod", Epoch: 5, Slot: 1, Slots: 3}
	for _, life := range []leaseLife{inheritedLife{e: e, in: in}, runLife{e: e, token: token},
		phaseLife{e: e, token: slot}} {
		t.Run(life.kind(), func(t *testing.T) {
			p := privateMap{}
			if d := storeLife(context.Background(), p, life); d.HasError() {
				t.Fatal(d)
			}
			var diags diag.Diagnostics
			got, ok := e.loadLife(context.Background(), p, &diags)
			if !ok || diags.HasError() || !reflect.DeepEqual(got, life) {
				t.Fatalf("loadLife = %#v, %v, %v; want %#v", got, ok, diags, life)
			}
		})
	}
	var diags diag.Diagnostics
	if got, ok := e.loadLife(context.Background(), privateMap{}, &diags); ok || len(diags) != 1 ||
		diags[0].Summary() != "Missing lease token" {
		t.Errorf("loadLife(no private data) = %#v, %v, %v; want the Missing lease token error", got, ok, diags)
	}
}
