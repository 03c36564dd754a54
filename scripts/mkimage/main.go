// Command mkimage builds ipledger's OCI image without a container daemon
// (scripts/release.sh runs it): one image per platform from scratch,
// holding the static binaries ipledger and galactic-ipam, the build
// machine's CA certificates, /etc/passwd and /etc/group naming the
// non-root user, and a data directory; an image index over the platforms;
// written as an OCI layout directory and as a tar of that layout (an
// oci-archive that skopeo, podman and `docker load` of recent Docker
// versions read).
//
//	go run ./scripts/mkimage --dist dist --version v1.2.0 --revision $(git rev-parse HEAD) \
//	    --created 2026-12-01T19:00:00Z --platforms linux/amd64,linux/arm64
//
// It reads dist/ipledger-linux-ARCH and dist/galactic-ipam-linux-ARCH and
// writes dist/oci/ and dist/ipledger-VERSION.oci.tar, where the image is
// named ghcr.io/ipledger/ipledger:VERSION (--name sets the repository).
// With --image ipledger-k8s it builds the Kubernetes manager's image the
// same way from dist/ipledger-k8s-linux-ARCH: dist/oci-ipledger-k8s/ and
// dist/ipledger-k8s-VERSION.oci.tar, named
// ghcr.io/ipledger/ipledger-k8s:VERSION.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	var o options
	var platforms, created string
	flag.StringVar(&o.dist, "dist", "dist", "folder holding ipledger-OS-ARCH and galactic-ipam-OS-ARCH; the image is written there")
	flag.StringVar(&o.version, "version", "", "the release's version (org.opencontainers.image.version)")
	flag.StringVar(&o.revision, "revision", "", "the git commit (org.opencontainers.image.revision)")
	flag.StringVar(&o.image, "image", "ipledger", "the image to build: ipledger (the server and galactic-ipam) or ipledger-k8s (the Kubernetes manager)")
	flag.StringVar(&o.name, "name", "", "the image's repository (default ghcr.io/ipledger/IMAGE); with the version it names the image in the layout (org.opencontainers.image.ref.name), as `podman load` will call it")
	flag.StringVar(&o.source, "source", "https://github.com/ipledger/ipledger", "the source repository (org.opencontainers.image.source)")
	flag.StringVar(&created, "created", "", "build time, RFC 3339 (org.opencontainers.image.created); default now")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated OS/ARCH list")
	flag.StringVar(&o.caCerts, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle put into the image")
	flag.Parse()
	o.platforms = strings.Split(platforms, ",")
	if _, err := o.spec(); err != nil {
		fail(err)
	}
	if o.name == "" {
		o.name = "ghcr.io/ipledger/" + o.image
	}
	o.created = time.Now().UTC().Truncate(time.Second)
	if created != "" {
		t, err := time.Parse(time.RFC3339, created)
		if err != nil {
			fail(fmt.Errorf("--created %q: %w", created, err))
		}
		o.created = t.UTC()
	}
	if o.version == "" || o.revision == "" {
		fail(fmt.Errorf("--version and --revision are required"))
	}
	ref, err := o.refName()
	if err != nil {
		fail(err)
	}
	idx, err := build(o)
	if err != nil {
		fail(err)
	}
	layoutDir := filepath.Join(o.dist, "oci")
	if o.image != "ipledger" {
		layoutDir += "-" + o.image
	}
	tarPath := filepath.Join(o.dist, o.image+"-"+o.version+".oci.tar")
	if err := write(idx, ref, layoutDir, tarPath, o.created); err != nil {
		fail(err)
	}
	d, _ := idx.Digest()
	fmt.Printf("image %s, index %s for %s\n  layout %s\n  archive %s\n", ref, d, platforms, layoutDir, tarPath)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mkimage:", err)
	os.Exit(1)
}
