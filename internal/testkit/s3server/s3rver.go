package s3server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// EnvS3rver names an environment variable that may point at an installed
// s3rver's entry point (node_modules/s3rver/bin/s3rver.js); when unset it is
// installed by tools/s3rver/install.sh (cached).
const EnvS3rver = "S3LOCK_S3RVER"

// s3rverCredentials are the fixed key pair s3rver accepts.
var s3rverCredentials = Credentials{AccessKeyID: "S3RVER", SecretAccessKey: "S3RVER"}

// s3rverSpec runs the s3rver emulator with node: path-style only, quiet.
var s3rverSpec = storeSpec{
	version: s3rverVersion,
	program: func(ctx context.Context, opts StoreOptions) ([]string, error) {
		node, err := exec.LookPath("node")
		if err != nil {
			return nil, fmt.Errorf("%w: node is not installed, so s3rver cannot run here (install Node.js 18 or later)", ErrUnavailable)
		}
		entry := os.Getenv(EnvS3rver)
		if entry != "" {
			if _, err := os.Stat(entry); err != nil {
				return nil, fmt.Errorf("s3server: %s=%q: %w", EnvS3rver, entry, err)
			}
		} else {
			args := []string{}
			if opts.NoInstall {
				args = append(args, "--installed")
			}
			if entry, err = scriptOutput(ctx, "tools/s3rver/install.sh", args...); err != nil {
				return nil, err
			}
		}
		return []string{node, entry}, nil
	},
	ports:       1,
	credentials: s3rverCredentials,
	command: func(data, _ string, ports []int, _ Credentials) ([]string, []string, error) {
		return []string{"--directory", data, "--address", "127.0.0.1", "--port", strconv.Itoa(ports[0]),
			"--silent", "--no-vhost-buckets"}, nil, nil
	},
}

// s3rverVersion returns the s3rver version pinned in tools/s3rver/package.json.
func s3rverVersion() (string, error) {
	root, err := repoDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, "tools", "s3rver", "package.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("s3server: %w", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && strings.Trim(k, `" `) == "s3rver" {
			return strings.Trim(v, `", `), nil
		}
	}
	return "", fmt.Errorf("s3server: %s pins no s3rver version", path)
}
