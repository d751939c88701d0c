package s3server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// seaweedPorts names, in order, the ports `weed mini` is given: S3's first
// (the Store's URL), then every other service's, each explicit so that no
// default port (9333, 8888, 8333, ...) of another process on the machine is
// used or probed for an alternative.
var seaweedPorts = []string{
	"s3.port", "s3.port.grpc",
	"master.port", "master.port.grpc",
	"volume.port", "volume.port.grpc",
	"filer.port", "filer.port.grpc",
	"admin.port", "admin.port.grpc",
	"webdav.port",
}

// seaweedSpec runs SeaweedFS's all-in-one `weed mini` on loopback: its S3
// gateway with one admin identity and a local KMS from an s3 config file
// (writeSeaweedConfig), no WebDAV, no
// Iceberg or Lance catalog, no admin UI, no telemetry.
var seaweedSpec = storeSpec{
	version: func() (string, error) { return pinnedVersion(SeaweedFS) },
	program: func(ctx context.Context, _ StoreOptions) ([]string, error) {
		bin, err := storeBinary(ctx, SeaweedFS, EnvWeedBinary)
		return []string{bin}, err
	},
	ports:       len(seaweedPorts),
	credentials: Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey},
	command: func(data, etc string, ports []int, creds Credentials) ([]string, []string, error) {
		config := filepath.Join(etc, "s3.json")
		if err := writeSeaweedConfig(config, creds); err != nil {
			return nil, nil, err
		}
		args := []string{"mini", "-dir", data, "-ip", "127.0.0.1", "-ip.bind", "127.0.0.1",
			"-s3.config", config, "-s3.port.iceberg", "0", "-s3.port.lance", "0",
			"-webdav=false", "-admin.ui=false", "-admin.port.legacy", "0", "-master.telemetry=false"}
		for i, name := range seaweedPorts {
			args = append(args, "-"+name, strconv.Itoa(ports[i]))
		}
		return args, nil, nil
	},
}

// writeSeaweedConfig writes the S3 gateway's config file: one identity with
// creds that may do everything, and SeaweedFS's local KMS, which creates a
// key on the first request that names it, so that SSE-KMS writes are served
// (without a KMS they fail with 500 InternalError). The local KMS keeps its
// keys in memory: what was encrypted with SSE-KMS cannot be read after a
// restart (the suite reads no object of an earlier run).
func writeSeaweedConfig(path string, creds Credentials) error {
	type credential struct {
		AccessKey string `json:"accessKey"`
		SecretKey string `json:"secretKey"`
	}
	type identity struct {
		Name        string       `json:"name"`
		Credentials []credential `json:"credentials"`
		Actions     []string     `json:"actions"`
	}
	type kmsProvider struct {
		Type                 string `json:"type"`
		EnableOnDemandCreate bool   `json:"enableOnDemandCreate"`
	}
	type kms struct {
		DefaultProvider string                 `json:"default_provider"`
		Providers       map[string]kmsProvider `json:"providers"`
	}
	config := struct {
		Identities []identity `json:"identities"`
		KMS        kms        `json:"kms"`
	}{
		Identities: []identity{{
			Name:        "s3lock",
			Credentials: []credential{{AccessKey: creds.AccessKeyID, SecretKey: creds.SecretAccessKey}},
			Actions:     []string{"Admin", "Read", "Write", "List", "Tagging"},
		}},
		KMS: kms{DefaultProvider: "local", Providers: map[string]kmsProvider{"local": {Type: "local", EnableOnDemandCreate: true}}},
	}
	data, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return fmt.Errorf("s3server: encoding SeaweedFS's s3 config: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("s3server: writing SeaweedFS's s3 config: %w", err)
	}
	return nil
}
