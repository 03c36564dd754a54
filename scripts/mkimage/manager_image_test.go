package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The Kubernetes manager's image holds its one binary (the bytes of
// dist/ipledger-k8s-linux-ARCH), runs it as the non-root user from /,
// exposes the metrics and probe ports and has no data volume; its labels
// name it, not the server.
func TestManagerImage(t *testing.T) {
	t.Parallel()
	const caBundle = "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(caBundle); err != nil {
		t.Skipf("no CA bundle at %s (Debian package ca-certificates): %v", caBundle, err)
	}
	dist := t.TempDir()
	body := []byte("\x7fELF stand-in for ipledger-k8s")
	if err := os.WriteFile(filepath.Join(dist, "ipledger-k8s-linux-amd64"), body, 0o755); err != nil {
		t.Fatal(err)
	}
	o := options{
		dist: dist, version: "v9.8.7-test", revision: "0123456789abcdef0123456789abcdef01234567",
		source: "https://github.com/ipledger/ipledger", caCerts: caBundle, name: "ghcr.io/ipledger/ipledger-k8s",
		platforms: []string{"linux/amd64"}, created: time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC), image: "ipledger-k8s",
	}
	idx, err := build(o)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("index %+v: %v", m, err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/ipledger-k8s"}) || len(c.Cmd) != 0 || c.User != "65532:65532" || c.WorkingDir != "/" {
		t.Errorf("entrypoint %v cmd %v user %q working dir %q", c.Entrypoint, c.Cmd, c.User, c.WorkingDir)
	}
	_, metrics := c.ExposedPorts["8080/tcp"]
	_, probes := c.ExposedPorts["8081/tcp"]
	if !metrics || !probes || len(c.Volumes) != 0 || c.Labels["org.opencontainers.image.title"] != "ipledger-k8s" {
		t.Errorf("ports %v volumes %v labels %v", c.ExposedPorts, c.Volumes, c.Labels)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers: %v", len(layers), err)
	}
	files := readLayer(t, layers[0])
	if got := files["usr/local/bin/ipledger-k8s"]; string(got.body) != string(body) || got.hdr.Mode != 0o755 {
		t.Errorf("usr/local/bin/ipledger-k8s: %q mode %o", got.body, got.hdr.Mode)
	}
	for _, absent := range []string{"usr/local/bin/ipledger", "usr/local/bin/galactic-ipam", "var/lib/ipledger/"} {
		if _, ok := files[absent]; ok {
			t.Errorf("the manager's image holds %s", absent)
		}
	}
}
