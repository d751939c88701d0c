package s3server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Environment variables that may point at prebuilt store binaries; when unset
// the binaries are built by tools/stores/build.sh (cached).
const (
	EnvMinIOBinary = "S3LOCK_MINIO"
	EnvWeedBinary  = "S3LOCK_WEED"
)

// MinIOKMSKeyID names the static KMS key MinIO is started with, so that it
// serves SSE-S3 and SSE-KMS writes (without a KMS it answers them
// NotImplemented). It is the key id the SDK suite's encryption tests ask
// for.
const MinIOKMSKeyID = "alias/locks"

// minioKMSKey is that key's value: fixed, so that a store started again on
// its data directory can read what it encrypted before. Not a secret: the
// store listens on loopback only.
const minioKMSKey = "czNsb2NrLWxvY2FsLW1pbmlvLWttcy1rZXktMzJieXQ=" // 32 bytes, base64

// minioSpec runs a single-drive MinIO server: root credentials and a static
// KMS key from the environment, no console, no update checks, its
// certificates directory beside the data (never ~/.minio).
var minioSpec = storeSpec{
	version: func() (string, error) { return pinnedVersion(MinIO) },
	program: func(ctx context.Context, _ StoreOptions) ([]string, error) {
		bin, err := storeBinary(ctx, MinIO, EnvMinIOBinary)
		return []string{bin}, err
	},
	ports:       2, // S3, and the console's (which MINIO_BROWSER=off leaves unused, but MinIO binds it)
	credentials: Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey},
	command: func(data, etc string, ports []int, creds Credentials) ([]string, []string, error) {
		args := []string{"server", "--quiet",
			"--address", fmt.Sprintf("127.0.0.1:%d", ports[0]),
			"--console-address", fmt.Sprintf("127.0.0.1:%d", ports[1]),
			"--certs-dir", filepath.Join(etc, "certs"), data}
		env := []string{
			"MINIO_ROOT_USER=" + creds.AccessKeyID,
			"MINIO_ROOT_PASSWORD=" + creds.SecretAccessKey,
			"MINIO_BROWSER=off",
			"MINIO_UPDATE=off",
			"MINIO_REGION=" + Region,
			"MINIO_KMS_SECRET_KEY=" + MinIOKMSKeyID + ":" + minioKMSKey,
		}
		return args, env, nil
	},
	// MinIO serves HTTPS when its certificates directory holds public.crt
	// and private.key (it refuses SSE-C requests over plain HTTP).
	installCert: func(etc, certFile, keyFile string) error {
		dir := filepath.Join(etc, "certs")
		if certFile == "" {
			for _, f := range []string{"public.crt", "private.key"} {
				if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
			return nil
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		for src, dst := range map[string]string{certFile: "public.crt", keyFile: "private.key"} {
			b, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, dst), b, 0o600); err != nil {
				return err
			}
		}
		return nil
	},
}

// storeBinary returns the binary of a store built by tools/stores/build.sh:
// $env when set, else the cached build (built now if there is none).
func storeBinary(ctx context.Context, kind Kind, env string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("s3server: %s=%q: %w", env, p, err)
		}
		return p, nil
	}
	return scriptOutput(ctx, "tools/stores/build.sh", string(kind))
}

// pinnedVersion returns the version of kind in tools/stores/versions.txt.
func pinnedVersion(kind Kind) (string, error) {
	root, err := repoDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, "tools", "stores", "versions.txt")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("s3server: %w", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == string(kind) {
			return f[2], nil
		}
	}
	return "", fmt.Errorf("s3server: %s pins no version of %s", path, kind)
}
