package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestImage builds the image for linux/amd64 from freshly built, stamped
// binaries (as scripts/release.sh does for both platforms), reads it
// back from the OCI layout and checks its index, config, user,
// entrypoint, labels and files; then runs the ipledger binary taken from
// the layer and compares its `version --output json` with the stamp.
func TestImage(t *testing.T) {
	t.Parallel()
	const caBundle = "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(caBundle); err != nil {
		t.Skipf("no CA bundle at %s (Debian package ca-certificates): %v", caBundle, err)
	}
	dist := t.TempDir()
	o := options{
		dist: dist, version: "v9.8.7-test", revision: "0123456789abcdef0123456789abcdef01234567",
		source: "https://github.com/ipledger/ipledger", caCerts: caBundle, name: "ghcr.io/ipledger/ipledger",
		platforms: []string{"linux/amd64"}, created: time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC),
	}
	buildBinaries(t, o, "amd64")
	idx, err := build(o)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := o.refName()
	if err != nil {
		t.Fatal(err)
	}
	layoutDir, tarPath := filepath.Join(dist, "oci"), filepath.Join(dist, "image.oci.tar")
	if err := write(idx, ref, layoutDir, tarPath, o.created); err != nil {
		t.Fatal(err)
	}
	// A second build of the same release is the same archive, byte for
	// byte (reproducible: no file times or modes of the build machine).
	again := filepath.Join(dist, "again.oci.tar")
	if err := write(idx, ref, filepath.Join(dist, "oci-again"), again, o.created); err != nil {
		t.Fatal(err)
	}
	if a, b := mustRead(t, tarPath), mustRead(t, again); !bytes.Equal(a, b) {
		t.Errorf("two writes of one release differ (%d and %d bytes)", len(a), len(b))
	}

	// The layout as a registry client reads it: index.json names the
	// release's index, which names one image per platform.
	lp, err := layout.FromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topM, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	// Named by a full image reference, so that `podman load` calls the
	// image ghcr.io/ipledger/ipledger:v9.8.7-test, not localhost/v9.8.7-test.
	if len(topM.Manifests) != 1 || topM.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "ghcr.io/ipledger/ipledger:v9.8.7-test" || topM.Manifests[0].MediaType != types.OCIImageIndex {
		t.Fatalf("index.json %+v", topM.Manifests)
	}
	rel, err := top.ImageIndex(topM.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	relM, err := rel.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	checkLabels(t, "index annotations", relM.Annotations, o)
	if len(relM.Manifests) != 1 || relM.Manifests[0].Platform == nil || relM.Manifests[0].Platform.Architecture != "amd64" || relM.Manifests[0].Platform.OS != "linux" {
		t.Fatalf("release index %+v", relM.Manifests)
	}
	img, err := rel.Image(relM.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s", mt)
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Time.Equal(o.created) {
		t.Errorf("config os %s arch %s created %s", cf.OS, cf.Architecture, cf.Created)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want the numeric non-root 65532:65532", c.User)
	}
	if got := append(slices.Clone(c.Entrypoint), c.Cmd...); !slices.Equal(got, []string{"/usr/local/bin/ipledger", "serve"}) {
		t.Errorf("entrypoint %v cmd %v, want ipledger serve", c.Entrypoint, c.Cmd)
	}
	for _, e := range []string{"IPLEDGER_LISTEN=0.0.0.0:8080", "IPLEDGER_DATABASE_URL=sqlite:/var/lib/ipledger/ipledger.db", "SSL_CERT_FILE=" + caBundle} {
		if !slices.Contains(c.Env, e) {
			t.Errorf("env %v lacks %s", c.Env, e)
		}
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok || c.WorkingDir != "/var/lib/ipledger" {
		t.Errorf("exposed ports %v, working dir %q", c.ExposedPorts, c.WorkingDir)
	}
	checkLabels(t, "config labels", c.Labels, o)

	// One layer, from scratch: exactly these files, owned by root except
	// the data directory.
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s", mt)
	}
	files := readLayer(t, layers[0])
	want := map[string]int64{
		"etc/": 0o755, "etc/ssl/": 0o755, "etc/ssl/certs/": 0o755, "etc/ssl/certs/ca-certificates.crt": 0o644,
		"etc/passwd": 0o644, "etc/group": 0o644, "usr/": 0o755, "usr/local/": 0o755, "usr/local/bin/": 0o755,
		"usr/local/bin/ipledger": 0o755, "usr/local/bin/galactic-ipam": 0o755, "var/": 0o755, "var/lib/": 0o755,
		"var/lib/ipledger/": 0o700, "tmp/": 0o1777,
	}
	for name, f := range files {
		mode, ok := want[name]
		if !ok {
			t.Errorf("unexpected %s in the layer", name)
			continue
		}
		owner := 0
		if name == "var/lib/ipledger/" {
			owner = 65532
		}
		if f.hdr.Mode != mode || f.hdr.Uid != owner || f.hdr.Gid != owner {
			t.Errorf("%s: mode %o uid %d gid %d, want %o and %d", name, f.hdr.Mode, f.hdr.Uid, f.hdr.Gid, mode, owner)
		}
	}
	for name := range want {
		if _, ok := files[name]; !ok {
			t.Errorf("%s missing from the layer", name)
		}
	}
	if ca, _ := os.ReadFile(caBundle); !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"].body, ca) {
		t.Error("the layer's CA bundle is not the build machine's")
	}
	if !strings.Contains(string(files["etc/passwd"].body), "ipledger:x:65532:65532:") {
		t.Errorf("/etc/passwd %q", files["etc/passwd"].body)
	}
	for _, bin := range []string{"ipledger", "galactic-ipam"} {
		built, _ := os.ReadFile(filepath.Join(dist, bin+"-linux-amd64"))
		if !bytes.Equal(files["usr/local/bin/"+bin].body, built) {
			t.Errorf("the layer's %s is not the built binary", bin)
		}
	}

	// The binary from the layer runs and says what it is.
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("cannot run a linux/amd64 binary on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	bin := filepath.Join(t.TempDir(), "ipledger")
	if err := os.WriteFile(bin, files["usr/local/bin/ipledger"].body, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version", "--output", "json").Output()
	if err != nil {
		t.Fatalf("ipledger version from the image: %v", err)
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("version --output json: %q: %v", out, err)
	}
	if got["version"] != o.version || got["commit"] != o.revision || got["date"] != o.created.Format(time.RFC3339) || got["go_version"] != runtime.Version() {
		t.Errorf("the image's ipledger says %v, want version %s commit %s date %s", got, o.version, o.revision, o.created.Format(time.RFC3339))
	}

	// The archive holds the same layout.
	names := tarNames(t, tarPath)
	for _, n := range []string{"oci-layout", "index.json", "blobs/sha256/" + relM.Manifests[0].Digest.Hex} {
		if !slices.Contains(names, n) {
			t.Errorf("%s lacks %s: %v", tarPath, n, names)
		}
	}
}

// buildBinaries builds ipledger and galactic-ipam for linux/ARCH the way
// scripts/release.sh does, stamped with o's version, into o.dist.
func buildBinaries(t *testing.T, o options, arch string) {
	t.Helper()
	const pkg = "github.com/ipledger/ipledger/buildinfo"
	ldflags := "-s -w -X " + pkg + ".version=" + o.version + " -X " + pkg + ".commit=" + o.revision + " -X " + pkg + ".date=" + o.created.Format(time.RFC3339)
	out := t.TempDir()
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out+"/", "./cmd/ipledger", "./cmd/galactic-ipam")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	for _, bin := range []string{"ipledger", "galactic-ipam"} {
		if err := os.Rename(filepath.Join(out, bin), filepath.Join(o.dist, bin+"-linux-"+arch)); err != nil {
			t.Fatal(err)
		}
	}
}

func checkLabels(t *testing.T, what string, got map[string]string, o options) {
	t.Helper()
	for k, v := range map[string]string{
		"org.opencontainers.image.version": o.version, "org.opencontainers.image.revision": o.revision,
		"org.opencontainers.image.source": o.source, "org.opencontainers.image.created": "2026-12-01T19:00:00Z",
		"org.opencontainers.image.title": "ipledger",
	} {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
		}
	}
}

type entry struct {
	hdr  *tar.Header
	body []byte
}

func readLayer(t *testing.T, l v1.Layer) map[string]entry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := out[h.Name]; dup {
			t.Errorf("%s twice in the layer", h.Name)
		}
		out[h.Name] = entry{h, b}
	}
}

func tarNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The layout names the image by a full reference, repository and tag;
// a name or version a registry would refuse is refused before anything
// is written.
func TestRefName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, version, want string }{
		{"ghcr.io/ipledger/ipledger", "v1.2.0", "ghcr.io/ipledger/ipledger:v1.2.0"},
		{"registry.example:5000/site/ipledger", "ci-9296877a1a9e", "registry.example:5000/site/ipledger:ci-9296877a1a9e"},
		{"ipledger", "v1.2.0-3-gc702d87-dirty", "ipledger:v1.2.0-3-gc702d87-dirty"},
		{"ghcr.io/ipledger/ipledger", "v1.2.0+build.5", ""},
		{"ghcr.io/IPledger/ipledger", "v1.2.0", ""},
		{"", "v1.2.0", ""},
		{"ghcr.io/ipledger/ipledger", "", ""},
	} {
		got, err := options{name: c.name, version: c.version}.refName()
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("name %q version %q: %q, %v; want %q", c.name, c.version, got, err, c.want)
		}
	}
}
