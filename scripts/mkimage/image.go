package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: a numeric uid and gid (Kubernetes' runAsNonRoot
// needs a number to check), named in /etc/passwd for tools that print
// names.
const (
	uid      = 65532
	userName = "ipledger"
	dataDir  = "/var/lib/ipledger"
	binDir   = "/usr/local/bin"
	caPath   = "/etc/ssl/certs/ca-certificates.crt"
)

type options struct {
	dist, version, revision, source, caCerts string
	// name is the image's repository (ghcr.io/ipledger/ipledger, the Helm
	// chart's image.repository): with the version it names the layout's
	// image (refName).
	name      string
	platforms []string
	created   time.Time
	// image is the image built: a key of images ("" is ipledger).
	image string
}

// imageSpec is what one image of the release holds and runs.
type imageSpec struct {
	title, description string
	// binaries are read from dist/BIN-linux-ARCH into binDir.
	binaries        []string
	entrypoint, cmd []string
	env             []string
	ports           []string
	// dataDir is the working directory and volume, owned by the user ("":
	// none; the working directory is /).
	dataDir string
}

// images are the release's images: ipledger's (the server and the CNI
// plugin) and the Kubernetes manager's, each with one concern.
var images = map[string]imageSpec{
	"ipledger": {
		title:       "ipledger",
		description: "The address authority of a bare-metal site: resource pools, DPU loopback reservations, allocations",
		binaries:    []string{"ipledger", "galactic-ipam"},
		entrypoint:  []string{binDir + "/ipledger"}, cmd: []string{"serve"},
		env: []string{
			// In a container the server listens on every address; the
			// binary's own default is loopback.
			"IPLEDGER_LISTEN=0.0.0.0:8080",
			"IPLEDGER_DATABASE_URL=sqlite:" + dataDir + "/ipledger.db",
		},
		ports:   []string{"8080/tcp"},
		dataDir: dataDir,
	},
	"ipledger-k8s": {
		title:       "ipledger-k8s",
		description: "ipledger's Kubernetes manager: the Cluster API IPAM provider and NetworkAttachmentDefinitions for galactic-ipam",
		binaries:    []string{"ipledger-k8s"},
		entrypoint:  []string{binDir + "/ipledger-k8s"},
		// Metrics and the health probes (the manager's defaults).
		ports: []string{"8080/tcp", "8081/tcp"},
	},
}

// spec is the image o builds.
func (o options) spec() (imageSpec, error) {
	name := o.image
	if name == "" {
		name = "ipledger"
	}
	s, ok := images[name]
	if !ok {
		return imageSpec{}, fmt.Errorf("--image %q: want ipledger or ipledger-k8s", o.image)
	}
	return s, nil
}

// refName is the layout's name of the image, a full image reference
// (org.opencontainers.image.ref.name): `podman load` and `ctr image
// import` name the loaded image by it, skopeo's oci: transport finds the
// image by it. An error names a reference a registry would refuse.
func (o options) refName() (string, error) {
	ref := o.name + ":" + o.version
	tag, err := name.NewTag(ref, name.WeakValidation)
	if err != nil || tag.TagStr() != o.version {
		return "", fmt.Errorf("--name %q with --version %q: %q is not an image reference (registry/repository:tag): %v", o.name, o.version, ref, err)
	}
	return ref, nil
}

// labels are the OCI annotations of the image config, manifests and
// index.
func (o options) labels() map[string]string {
	s, _ := o.spec()
	return map[string]string{
		"org.opencontainers.image.title":       s.title,
		"org.opencontainers.image.description": s.description,
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.revision":    o.revision,
		"org.opencontainers.image.source":      o.source,
		"org.opencontainers.image.created":     o.created.Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

// build makes one image per platform and the index over them.
func build(o options) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.platforms {
		osName, arch, ok := strings.Cut(p, "/")
		if !ok || osName != "linux" {
			return nil, fmt.Errorf("platform %q: want linux/ARCH", p)
		}
		img, err := platformImage(o, arch)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: osName, Architecture: arch},
		}})
	}
	return mutate.Annotations(idx, o.labels()).(v1.ImageIndex), nil
}

func platformImage(o options, arch string) (v1.Image, error) {
	spec, err := o.spec()
	if err != nil {
		return nil, err
	}
	data, err := rootFS(o, spec, arch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.created}, CreatedBy: "scripts/mkimage: " + strings.Join(spec.binaries, " and ") + " " + o.version + ", CA certificates, user " + userName,
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: o.created}
	cf.Author = o.source
	ports := map[string]struct{}{}
	for _, p := range spec.ports {
		ports[p] = struct{}{}
	}
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", uid, uid),
		Entrypoint:   spec.entrypoint,
		Cmd:          spec.cmd,
		WorkingDir:   "/",
		Env:          append([]string{"PATH=" + binDir, "SSL_CERT_FILE=" + caPath}, spec.env...),
		ExposedPorts: ports,
		Labels:       o.labels(),
		StopSignal:   "SIGTERM",
	}
	if spec.dataDir != "" {
		cf.Config.WorkingDir = spec.dataDir
		cf.Config.Volumes = map[string]struct{}{spec.dataDir: {}}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, o.labels()).(v1.Image), nil
}

// rootFS is the image's one layer, as an uncompressed tar with fixed
// owners and times (the same inputs give the same layer digest).
func rootFS(o options, spec imageSpec, arch string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) error {
		h.ModTime, h.Format = o.created, tar.FormatPAX
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	dir := func(name string, mode int64, owner int) error {
		return add(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: owner, Gid: owner}, nil)
	}
	file := func(name string, mode int64, body []byte) error {
		return add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode}, body)
	}
	for _, d := range []string{"etc", "etc/ssl", "etc/ssl/certs", "usr", "usr/local", "usr/local/bin", "var", "var/lib"} {
		if err := dir(d, 0o755, 0); err != nil {
			return nil, err
		}
	}
	home := "/"
	if spec.dataDir != "" {
		home = spec.dataDir
		if err := dir(strings.TrimPrefix(spec.dataDir, "/"), 0o700, uid); err != nil {
			return nil, err
		}
	}
	if err := add(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}, nil); err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(o.caCerts)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:ipledger:%s:/sbin/nologin\n", userName, uid, uid, home)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, uid)
	for _, f := range []struct {
		name string
		body []byte
	}{{strings.TrimPrefix(caPath, "/"), ca}, {"etc/passwd", []byte(passwd)}, {"etc/group", []byte(group)}} {
		if err := file(f.name, 0o644, f.body); err != nil {
			return nil, err
		}
	}
	for _, bin := range spec.binaries {
		body, err := os.ReadFile(filepath.Join(o.dist, bin+"-linux-"+arch))
		if err != nil {
			return nil, err
		}
		if err := file(strings.TrimPrefix(binDir, "/")+"/"+bin, 0o755, body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
