package tfharness_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
)

func TestDetect(t *testing.T) {
	cases := []struct {
		name     string
		output   string
		want     tfharness.CLI
		wantHost string
		wantErr  bool
	}{
		{
			name:     "terraform",
			output:   "Terraform v1.11.4\non linux_amd64\n",
			want:     tfharness.CLI{Product: tfharness.ProductTerraform, Version: "1.11.4"},
			wantHost: "registry.terraform.io",
		},
		{
			name: "opentofu after warnings about its CLI configuration",
			output: "There are some problems with the CLI configuration:\n\nWarning: Unable to open CLI configuration file\n\n" +
				"OpenTofu v1.12.6\non linux_amd64\n",
			want:     tfharness.CLI{Product: tfharness.ProductOpenTofu, Version: "1.12.6"},
			wantHost: "registry.opentofu.org",
		},
		{
			name:     "development build",
			output:   "Terraform v1.15.0-dev\non linux_amd64\n",
			want:     tfharness.CLI{Product: tfharness.ProductTerraform, Version: "1.15.0-dev"},
			wantHost: "registry.terraform.io",
		},
		{name: "something else", output: "Packer v1.11.2\n", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "cli")
			script := "#!/bin/sh\n[ \"$1\" = version ] || exit 3\ncat <<'OUT'\n" + tc.output + "OUT\n"
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			got, err := tfharness.Detect(t.Context(), bin)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Detect: %+v, %v; want error %v", got, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			tc.want.Path = bin
			if got != tc.want {
				t.Errorf("Detect = %+v, want %+v", got, tc.want)
			}
			if host := got.RegistryHost(); host != tc.wantHost {
				t.Errorf("RegistryHost = %s, want %s", host, tc.wantHost)
			}
			if src := got.ProviderSource(); src != tc.wantHost+"/s3lock/s3lock" {
				t.Errorf("ProviderSource = %s", src)
			}
		})
	}
}
