package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3server"
	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/s3test"
	"github.com/s3lock/terraform-provider-s3lock/s3lock"
	"github.com/s3lock/terraform-provider-s3lock/s3lock/storecheck"
)

// TestVerify_RefusesAStoreThatIgnoresConditionalWrites: on s3rver, a real S3
// emulator that accepts If-None-Match and If-Match and ignores them, the
// SDK's Verify returns ErrConditionalWritesUnsupported and `s3lock verify`
// exits 1 with one line on stderr that says so.
func TestVerify_RefusesAStoreThatIgnoresConditionalWrites(t *testing.T) {
	t.Parallel()
	st := s3test.StartStore(t, s3server.S3rver, "")
	const bucket = "s3lock-ignoring"
	client := s3server.NewClient(st, nil)
	if _, err := client.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}

	sdk, err := s3lock.New(client, bucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := storecheck.Verify(t.Context(), sdk, ""); !errors.Is(err, s3lock.ErrConditionalWritesUnsupported) {
		t.Errorf("storecheck.Verify on s3rver = %v; want ErrConditionalWritesUnsupported", err)
	}

	r := runOn(t, st, bucket, "verify")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != exitError || len(lines) != 1 || !strings.Contains(lines[0], "conditional writes") {
		t.Fatalf("s3lock verify on s3rver: %s\nwant exit %d and one line on stderr naming conditional writes", r, exitError)
	}
	if !strings.Contains(r.stdout, "conditional writes  failed") {
		t.Errorf("the report does not show the failed conditional-write check:\n%s", r.stdout)
	}
}

// runOn runs s3lock against bucket on st with only st's settings in the
// environment (as newCLI does for the suite's store).
func runOn(t *testing.T, st s3server.Store, bucket string, args ...string) result {
	t.Helper()
	home := t.TempDir()
	creds := st.Credentials()
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "S3LOCK_") && !strings.HasPrefix(k, "AWS_") && k != "HOME" {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home,
		"S3LOCK_ENDPOINT="+st.URL(), "S3LOCK_BUCKET="+bucket, "S3LOCK_USE_PATH_STYLE=true",
		"AWS_ACCESS_KEY_ID="+creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey, "AWS_REGION="+s3server.Region,
		"AWS_CONFIG_FILE="+filepath.Join(home, "aws-config"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true")
	ctx, cancel := context.WithTimeout(t.Context(), processLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env, cmd.Dir = env, home
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("s3lock %q: %v", args, err)
	}
	return r
}
