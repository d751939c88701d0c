package tfstate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/internal/tfstate"
)

// TestStore_RefusesWorkspaceDotDotThatWroteToEnvDotDotKey: the store took
// any workspace name, so `terraform workspace new ..` and an apply with
// -lock=false wrote the state to env:/../KEY. Every operation on a
// workspace now refuses a name that is not one (".", "..", "/", control
// characters, what a URL path would escape) or whose key cannot name its
// lock, before any request; and a state found under such a name is not
// listed as a workspace.
func TestStore_RefusesWorkspaceDotDotThatWroteToEnvDotDotKey(t *testing.T) {
	ns := s3test.New(t)
	s := newStore(t, ns, "a", nil, tfstate.Config{})
	key := ns.Name("team/terraform.tfstate")
	ctx := t.Context()
	bad := []string{".", "..", "a/b", "../x", "tab\there", "nul\x00", "new\nline", "sp ace", "per%2Ecent", "ünï",
		"x.s3lock", strings.Repeat("w", 1100)}
	for _, ws := range bad {
		ops := map[string]error{}
		_, ops["Lock"] = s.Lock(ctx, ws, "OperationTypeApply")
		_, ops["Read"] = s.Read(ctx, ws)
		ops["Write"] = s.Write(ctx, ws, stateJSON("1"))
		ops["WriteUnder"] = s.WriteUnder(ctx, ws, "1", stateJSON("1"))
		ops["WriteUnlocked"] = s.WriteUnlocked(ctx, ws, stateJSON("1"))
		ops["Unlock"] = s.Unlock(ctx, ws, "1")
		ops["Delete"] = s.Delete(ctx, ws)
		for op, err := range ops {
			if !errors.Is(err, tfstate.ErrInvalidConfig) {
				t.Errorf("%s(%q) = %v; want ErrInvalidConfig", op, tfstate.Printable(ws), err)
			}
		}
	}
	if err := s.Write(ctx, "dev", stateJSON("1")); err != nil {
		t.Fatal(err)
	}
	out, err := ns.Client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(ns.Bucket), Prefix: aws.String("env:/")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		if k := aws.ToString(o.Key); strings.HasSuffix(k, key) && k != "env:/dev/"+key {
			t.Errorf("s3://%s/%s was written", ns.Bucket, k)
		}
	}
	// States written by hand (or by the store before) under such names are
	// not offered as workspaces.
	for _, ws := range []string{"..", ".", "sp ace", "x.s3lock"} {
		if _, err := ns.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(ns.Bucket),
			Key: aws.String("env:/" + ws + "/" + key), Body: strings.NewReader("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Workspaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "default,dev" {
		t.Errorf("Workspaces = %q; want [default dev]", got)
	}
}
