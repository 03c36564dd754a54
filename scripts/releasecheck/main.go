// Command releasecheck checks what scripts/release.sh wrote into dist/
// (release.sh runs it last; docs/operations.md, "Release artifacts"):
//
//	go run ./scripts/releasecheck --dist dist --version v1.2.0
//
// Each binary, ipledger, galactic-ipam and ipledger-k8s (the Kubernetes
// manager) for linux/amd64 and linux/arm64, must be an ELF file of its architecture without an
// interpreter or dynamic section (static: nothing to load), whose Go build
// information (what `go version -m` prints) says CGO_ENABLED=0 and
// -trimpath, and ipledger must carry the release's version (the binary of
// this machine's platform is run: `ipledger version`, whose --output json
// is one line), and so must ipledger-k8s (`ipledger-k8s --version`). Each
// OCI layout's index — dist/oci for ipledger's image, dist/oci-ipledger-k8s
// for the manager's — must name the release's index by a full image
// reference (ghcr.io/ipledger/IMAGE:VERSION; --name sets the repository
// of ipledger's), holding one image for linux/amd64 and one for
// linux/arm64, each with its platform in its config and the release's
// binaries in its layer; each layout's archive must hold the layout.
//
// It prints one line per artifact checked, with its size, and exits 1
// naming each problem. The checksums and the chart are checked by
// `sha256sum -c` and deploy/chartcheck (scripts/release-check.sh).
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var (
	arches = []string{"amd64", "arm64"}
	// binaries are the release's binaries by the image holding them.
	binaries = map[string][]string{"ipledger": {"ipledger", "galactic-ipam"}, "ipledger-k8s": {"ipledger-k8s"}}
	// mainPackages are the binaries' main packages.
	mainPackages = map[string]string{
		"ipledger":      "github.com/ipledger/ipledger/cmd/ipledger",
		"galactic-ipam": "github.com/ipledger/ipledger/cmd/galactic-ipam",
		"ipledger-k8s":  "github.com/ipledger/ipledger/k8s/cmd/ipledger-k8s",
	}
	machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
)

func main() {
	dist := flag.String("dist", "dist", "the release folder")
	version := flag.String("version", "", "the version the release was built as")
	imageName := flag.String("name", "ghcr.io/ipledger/ipledger", "the image's repository (scripts/mkimage --name)")
	flag.Parse()
	if *version == "" {
		fmt.Fprintln(os.Stderr, "releasecheck: --version is required")
		os.Exit(2)
	}
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	digests := map[string]string{} // dist file name → sha256
	for _, arch := range arches {
		for _, bin := range slices.Sorted(maps.Keys(mainPackages)) {
			name := bin + "-linux-" + arch
			sum, err := checkBinary(filepath.Join(*dist, name), bin, arch, *version)
			if err != nil {
				fail("%s: %v", name, err)
				continue
			}
			digests[name] = sum
		}
	}
	for _, img := range []struct{ image, layout, ref string }{
		{"ipledger", "oci", *imageName + ":" + *version},
		{"ipledger-k8s", "oci-ipledger-k8s", "ghcr.io/ipledger/ipledger-k8s:" + *version},
	} {
		if err := checkImage(filepath.Join(*dist, img.layout), img.ref, binaries[img.image], digests); err != nil {
			fail("%s: %v", img.layout, err)
		}
		if err := checkArchive(filepath.Join(*dist, img.image+"-"+*version+".oci.tar")); err != nil {
			fail("%s-%s.oci.tar: %v", img.image, *version, err)
		}
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "releasecheck:", p)
		}
		os.Exit(1)
	}
	fmt.Printf("release %s: binaries static, stamped and in their images for %s\n", *version, strings.Join(arches, " and "))
}

// checkBinary checks one binary and returns its sha256.
func checkBinary(path, bin, arch, version string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read only
	if f.Machine != machines[arch] {
		return "", fmt.Errorf("ELF machine %s, want %s", f.Machine, machines[arch])
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			return "", fmt.Errorf("has a %s program header: not static", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return "", fmt.Errorf("needs the shared libraries %v", libs)
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("Go build information: %w", err)
	}
	if want := mainPackages[bin]; info.Path != want {
		return "", fmt.Errorf("built from %s, want %s", info.Path, want)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, want := range map[string]string{"CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": arch, "-trimpath": "true"} {
		if settings[k] != want {
			return "", fmt.Errorf("built with %s=%q, want %q", k, settings[k], want)
		}
	}
	// -trimpath leaves -ldflags out of the build information: the stamp
	// is looked for in the binary itself, and the binary of this machine's
	// platform is asked for it.
	// (galactic-ipam, which a container runtime runs, has no version.)
	if ok, err := fileContains(path, []byte(version)); bin != "galactic-ipam" && (err != nil || !ok) {
		return "", fmt.Errorf("the version %s is not stamped into it (%v)", version, err)
	}
	if arch == runtime.GOARCH && runtime.GOOS == "linux" && bin == "ipledger-k8s" {
		out, err := exec.Command(path, "--version").Output()
		if want := "ipledger-k8s " + version + "\n"; err != nil || string(out) != want {
			return "", fmt.Errorf("`--version` says %q (%v), want %q", out, err, want)
		}
	}
	if arch == runtime.GOARCH && runtime.GOOS == "linux" && bin == "ipledger" {
		out, err := exec.Command(path, "version", "--output", "json").Output()
		var got struct{ Version, Commit string }
		if err != nil || json.Unmarshal(out, &got) != nil || got.Version != version || got.Commit == "" {
			return "", fmt.Errorf("`version --output json` says %q (%v), want version %s and a commit", out, err, version)
		}
		// One line, as the CLI prints every --output json (README.md, "CLI").
		if bytes.Count(out, []byte("\n")) != 1 || !bytes.HasSuffix(out, []byte("\n")) {
			return "", fmt.Errorf("`version --output json` printed %q: want one line", out)
		}
	}
	sum, size, err := sha256File(path)
	if err != nil {
		return "", err
	}
	fmt.Printf("%-28s %12d bytes  static, %s, CGO_ENABLED=0, -trimpath, %s\n", filepath.Base(path), size, f.Machine, info.GoVersion)
	return sum, nil
}

// checkImage reads the OCI layout as a registry client would and checks
// that it names the image ref (a full image reference, as `podman load`
// names what it loads), and each platform's image against the binaries
// in dist.
func checkImage(dir, ref string, bins []string, digests map[string]string) error {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return err
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return err
	}
	topM, err := top.IndexManifest()
	if err != nil {
		return err
	}
	if len(topM.Manifests) != 1 || topM.Manifests[0].MediaType != types.OCIImageIndex ||
		topM.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != ref {
		return fmt.Errorf("index.json should name one image index, %s: %+v", ref, topM.Manifests)
	}
	if _, err := name.NewTag(ref, name.WeakValidation); err != nil {
		return fmt.Errorf("the image is named %q, not an image reference: %w", ref, err)
	}
	rel, err := top.ImageIndex(topM.Manifests[0].Digest)
	if err != nil {
		return err
	}
	relM, err := rel.IndexManifest()
	if err != nil {
		return err
	}
	var platforms []string
	for _, m := range relM.Manifests {
		if m.Platform == nil {
			return fmt.Errorf("manifest %s has no platform", m.Digest)
		}
		arch := m.Platform.Architecture
		platforms = append(platforms, m.Platform.OS+"/"+arch)
		img, err := rel.Image(m.Digest)
		if err != nil {
			return err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		if cf.OS != m.Platform.OS || cf.Architecture != arch {
			return fmt.Errorf("the %s/%s manifest's config says %s/%s", m.Platform.OS, arch, cf.OS, cf.Architecture)
		}
		layers, err := img.Layers()
		if err != nil {
			return err
		}
		if len(layers) != 1 {
			return fmt.Errorf("%s: %d layers, want 1", arch, len(layers))
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			return err
		}
		found, err := layerSums(rc)
		rc.Close()
		if err != nil {
			return err
		}
		for _, bin := range bins {
			want := digests[bin+"-linux-"+arch]
			if got := found["usr/local/bin/"+bin]; want == "" || got != want {
				return fmt.Errorf("the %s image's /usr/local/bin/%s (sha256 %q) is not %s-linux-%s (%q)", arch, bin, got, bin, arch, want)
			}
		}
		fmt.Printf("image %s %-12s manifest %s, config %s/%s, the release's binaries\n", ref, m.Platform.OS+"/"+arch, m.Digest.String()[:19], cf.OS, cf.Architecture)
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		return fmt.Errorf("the release index holds %v, want linux/amd64 and linux/arm64", platforms)
	}
	return nil
}

// layerSums returns the sha256 of each regular file of a layer's tar.
func layerSums(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		d := sha256.New()
		if _, err := io.Copy(d, tr); err != nil {
			return nil, err
		}
		out[h.Name] = hex.EncodeToString(d.Sum(nil))
	}
}

// checkArchive checks that the layout's tar holds a layout.
func checkArchive(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		names = append(names, h.Name)
	}
	for _, n := range []string{"oci-layout", "index.json"} {
		if !slices.Contains(names, n) {
			return fmt.Errorf("no %s among its %d entries", n, len(names))
		}
	}
	fmt.Printf("%-28s %12d bytes  an OCI layout of %d entries\n", filepath.Base(path), st.Size(), len(names))
	return nil
}

func fileContains(path string, b []byte) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	return bytes.Contains(data, b), nil
}

func sha256File(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	d := sha256.New()
	n, err := io.Copy(d, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(d.Sum(nil)), n, nil
}
