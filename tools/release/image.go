package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The CLI's container image: FROM scratch, the CLI as its entrypoint, a CA
// bundle, a non-root user, one layer. It is written as an OCI image layout
// in a tar file (s3lock_VERSION_image.tar): podman load, skopeo copy
// oci-archive:… and docker load (Docker 25 and later) take it, and any
// registry can be pushed to from it.
const (
	imageBinary = "/usr/local/bin/s3lock"
	imageCAFile = "/etc/ssl/certs/ca-certificates.crt"
	imageUID    = 65532 // "nonroot", as distroless images name it
	imageHome   = "/home/nonroot"
)

// imageTargets are the platforms of the image.
var imageTargets = []target{{"linux", "amd64"}, {"linux", "arm64"}}

// OCI media types.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// layout is an OCI image layout being written: its blobs by digest.
type layout struct {
	blobs map[string][]byte
}

// add stores data as a blob and returns its descriptor.
func (l *layout) add(mediaType string, data []byte) descriptor {
	sum := sha256.Sum256(data)
	d := descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}
	l.blobs[d.Digest] = data
	return d
}

func (l *layout) addJSON(mediaType string, v any) (descriptor, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return descriptor{}, err
	}
	return l.add(mediaType, data), nil
}

// image writes the CLI's image for targets (the Linux ones of
// imageTargets) into the release directory, with caBundle as its CA
// bundle.
// It returns the file's name ("" when targets is empty).
func (b *builder) image(ctx context.Context, targets []target, caBundle string) (string, error) {
	if len(targets) == 0 {
		return "", nil
	}
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return "", fmt.Errorf("the image's CA bundle (-ca-bundle): %w", err)
	}
	caSum := sha256.Sum256(ca)
	fmt.Fprintf(os.Stderr, "release: the image's CA bundle: %s (SHA-256 %x)\n", caBundle, caSum)
	l := &layout{blobs: map[string][]byte{}}
	var manifests []descriptor
	for _, t := range targets {
		m, err := b.imageManifest(ctx, l, t, ca)
		if err != nil {
			return "", err
		}
		manifests = append(manifests, m)
	}
	// index.json names the image (ref.name, the tag podman load and skopeo
	// give it) and points at its image index, which lists a manifest per
	// platform.
	image, err := l.addJSON(mediaIndex, map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": manifests})
	if err != nil {
		return "", err
	}
	image.Annotations = map[string]string{"org.opencontainers.image.ref.name": cliName + ":" + b.version}
	indexJSON, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{image}})
	if err != nil {
		return "", err
	}
	name := cliName + "_" + b.version + "_image.tar"
	fmt.Fprintf(os.Stderr, "release: %s\n", name)
	return name, create(filepath.Join(b.dir, name), func(w io.Writer) error {
		return l.writeTar(w, indexJSON, b.mtime)
	})
}

// imageManifest builds the CLI for t and adds its layer, config and
// manifest to l.
func (b *builder) imageManifest(ctx context.Context, l *layout, t target, ca []byte) (descriptor, error) {
	tmp, err := os.MkdirTemp("", "s3lock-image-")
	if err != nil {
		return descriptor{}, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "s3lock")
	if _, err := b.goBuild(ctx, t, "./cmd/s3lock", bin); err != nil {
		return descriptor{}, err
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return descriptor{}, err
	}
	layerTar, err := rootFS(exe, ca, b.mtime)
	if err != nil {
		return descriptor{}, err
	}
	diffID := sha256.Sum256(layerTar)
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return descriptor{}, err
	}
	if _, err := zw.Write(layerTar); err != nil {
		return descriptor{}, err
	}
	if err := zw.Close(); err != nil {
		return descriptor{}, err
	}
	layer := l.add(mediaLayer, gz.Bytes())
	created := b.mtime.Format(time.RFC3339)
	config, err := l.addJSON(mediaConfig, map[string]any{
		"created": created, "architecture": t.arch, "os": t.os,
		"config": map[string]any{
			"User":       fmt.Sprintf("%d:%d", imageUID, imageUID),
			"Entrypoint": []string{imageBinary},
			"Env":        []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=" + imageCAFile, "HOME=" + imageHome},
			"WorkingDir": imageHome,
			"Labels": map[string]string{
				"org.opencontainers.image.title":    "s3lock",
				"org.opencontainers.image.version":  b.version,
				"org.opencontainers.image.source":   "https://github.com/s3lock/terraform-provider-s3lock",
				"org.opencontainers.image.licenses": "MPL-2.0",
			},
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
		"history": []map[string]string{{"created": created, "created_by": "make release (tools/release)"}},
	})
	if err != nil {
		return descriptor{}, err
	}
	m, err := l.addJSON(mediaManifest, map[string]any{
		"schemaVersion": 2, "mediaType": mediaManifest, "config": config, "layers": []descriptor{layer},
	})
	if err != nil {
		return descriptor{}, err
	}
	m.Platform = &platform{Architecture: t.arch, OS: t.os}
	return m, nil
}

// rootFS is the image's only layer, as an uncompressed tar: the CLI, the
// CA bundle, the user's home and /tmp, and /etc/passwd naming the user.
func rootFS(exe, ca []byte, mtime time.Time) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", imageUID, imageUID, imageHome)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", imageUID)
	type node struct {
		path string
		mode int64
		data []byte
		dir  bool
		uid  int
	}
	nodes := []node{
		{path: "etc/", dir: true, mode: 0o755},
		{path: "etc/group", mode: 0o644, data: []byte(group)},
		{path: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "etc/ssl/", dir: true, mode: 0o755},
		{path: "etc/ssl/certs/", dir: true, mode: 0o755},
		{path: strings.TrimPrefix(imageCAFile, "/"), mode: 0o644, data: ca},
		{path: "home/", dir: true, mode: 0o755},
		{path: strings.TrimPrefix(imageHome, "/") + "/", dir: true, mode: 0o700, uid: imageUID},
		{path: "tmp/", dir: true, mode: 0o1777},
		{path: "usr/", dir: true, mode: 0o755},
		{path: "usr/local/", dir: true, mode: 0o755},
		{path: "usr/local/bin/", dir: true, mode: 0o755},
		{path: strings.TrimPrefix(imageBinary, "/"), mode: 0o755, data: exe},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range nodes {
		h := &tar.Header{Name: n.path, Mode: n.mode, Size: int64(len(n.data)), ModTime: mtime,
			Uid: n.uid, Gid: n.uid, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
		if n.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(n.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeTar writes the layout as a tar: oci-layout, index.json, then the
// blobs in digest order.
func (l *layout) writeTar(w io.Writer, index []byte, mtime time.Time) error {
	tw := tar.NewWriter(w)
	file := func(name string, data []byte) error {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, ModTime: mtime, Typeflag: tar.TypeDir, Format: tar.FormatUSTAR})
	}
	if err := file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := file("index.json", index); err != nil {
		return err
	}
	if err := dir("blobs/"); err != nil {
		return err
	}
	if err := dir("blobs/sha256/"); err != nil {
		return err
	}
	for _, digest := range slices.Sorted(maps.Keys(l.blobs)) {
		if err := file("blobs/sha256/"+strings.TrimPrefix(digest, "sha256:"), l.blobs[digest]); err != nil {
			return err
		}
	}
	return tw.Close()
}
