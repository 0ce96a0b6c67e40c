// Command image builds the muster-scheduler container image without a
// container engine or a registry: it puts a static binary on a minimal,
// distroless-like base assembled here (a passwd and group with the nonroot
// user 65532, /home/nonroot, /tmp) and writes the image as a tarball that
// `docker load` / `podman load` read, and as an OCI image layout that
// `crane push`, `skopeo copy oci:...` and containerd's `ctr import` read.
// It then reads the tarball back and checks what the Dockerfile promises:
// non-root user, entrypoint, a static binary for the platform.
//
// The Dockerfile builds the same layout on gcr.io/distroless/static:nonroot
// for those who have Docker; this tool exists because no registry (so no
// base image) and no engine are reachable where CI runs. Unlike that base,
// it ships no CA bundle and no tzdata: the scheduler talks only to the
// apiserver, with the CA of its ServiceAccount.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// binaryPath is where the Dockerfile and the Helm chart expect the
	// scheduler.
	binaryPath = "/usr/local/bin/muster-scheduler"
	// nonroot is distroless's unprivileged user and group.
	nonroot = 65532
)

type options struct {
	binary   string
	out      string
	tag      string
	platform string
	version  string
}

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "the static muster-scheduler binary (CGO_ENABLED=0)")
	flag.StringVar(&o.out, "out", "_output/image", "directory for muster-scheduler.tar and the OCI layout oci/")
	flag.StringVar(&o.tag, "tag", "ghcr.io/muster-sched/muster-scheduler:dev", "the image reference recorded in the tarball")
	flag.StringVar(&o.platform, "platform", "linux/amd64", "os/arch of the binary")
	flag.StringVar(&o.version, "version", "dev", "the org.opencontainers.image.version label")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.binary == "" {
		return errors.New("--binary is required")
	}
	platform, err := v1.ParsePlatform(o.platform)
	if err != nil {
		return err
	}
	ref, err := name.ParseReference(o.tag)
	if err != nil {
		return err
	}
	created, err := sourceDate()
	if err != nil {
		return err
	}
	binary, err := os.ReadFile(o.binary)
	if err != nil {
		return err
	}
	if err := checkStatic(bytes.NewReader(binary), platform.Architecture); err != nil {
		return fmt.Errorf("%s: %w", o.binary, err)
	}
	img, err := build(binary, *platform, created, o.version)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	tarPath := filepath.Join(o.out, "muster-scheduler.tar")
	if err := tarball.WriteToFile(tarPath, ref, img); err != nil {
		return err
	}
	layoutPath := filepath.Join(o.out, "oci")
	if err := os.RemoveAll(layoutPath); err != nil {
		return err
	}
	p, err := layout.Write(layoutPath, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref.String(),
	})); err != nil {
		return err
	}
	if err := verify(tarPath, ref, platform.Architecture); err != nil {
		return fmt.Errorf("checking %s: %w", tarPath, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	size, err := fileSize(tarPath)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s (%s, %.1f MiB)\n  docker load -i %s\n  OCI layout: %s\n", ref, digest, o.platform, float64(size)/(1<<20), tarPath, layoutPath)
	return nil
}

// build assembles the image: one layer holding the base files and the
// binary, run as nonroot.
func build(binary []byte, platform v1.Platform, created time.Time, version string) (v1.Image, error) {
	layerTar, err := rootfs(binary, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		History:   v1.History{CreatedBy: "hack/image: distroless-like base + " + binaryPath, Created: v1.Time{Time: created}},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = platform.OS, platform.Architecture, platform.Variant
	cfg.Created = v1.Time{Time: created}
	cfg.Config.User = fmt.Sprintf("%d:%d", nonroot, nonroot)
	cfg.Config.WorkingDir = "/home/nonroot"
	cfg.Config.Entrypoint = []string{binaryPath}
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       "muster-scheduler",
		"org.opencontainers.image.description": "kube-scheduler with Muster's batch plugins",
		"org.opencontainers.image.source":      "https://github.com/muster-sched/muster",
		"org.opencontainers.image.version":     version,
	}
	return mutate.ConfigFile(img, cfg)
}

// file is one entry of the image's file system.
type file struct {
	path     string
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// rootfs is the single layer: what distroless/static:nonroot provides that
// the scheduler uses, and the binary.
func rootfs(binary []byte, mtime time.Time) ([]byte, error) {
	files := []file{
		{path: "etc/", mode: 0o755, dir: true},
		{path: "etc/passwd", mode: 0o644, data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{path: "etc/group", mode: 0o644, data: []byte(
			"root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{path: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{path: "home/", mode: 0o755, dir: true},
		{path: "home/nonroot/", mode: 0o700, uid: nonroot, gid: nonroot, dir: true},
		{path: "root/", mode: 0o700, dir: true},
		{path: "tmp/", mode: 0o1777, dir: true},
		{path: "usr/", mode: 0o755, dir: true},
		{path: "usr/local/", mode: 0o755, dir: true},
		{path: "usr/local/bin/", mode: 0o755, dir: true},
		{path: strings.TrimPrefix(binaryPath, "/"), mode: 0o755, data: binary},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name: f.path, Mode: f.mode, Uid: f.uid, Gid: f.gid,
			ModTime: mtime, Format: tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// verify reads the written tarball back, as `docker load` would, and checks
// the promises of the image.
func verify(path string, ref name.Reference, arch string) error {
	tag, ok := ref.(name.Tag)
	if !ok {
		return fmt.Errorf("%s is not a tag", ref)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("%d:%d", nonroot, nonroot); cfg.Config.User != want {
		return fmt.Errorf("user %q, want %q", cfg.Config.User, want)
	}
	if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != binaryPath {
		return fmt.Errorf("entrypoint %q, want [%s]", cfg.Config.Entrypoint, binaryPath)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if len(layers) != 1 {
		return fmt.Errorf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fmt.Errorf("no %s in the image", binaryPath)
		}
		if err != nil {
			return err
		}
		if "/"+h.Name != binaryPath {
			continue
		}
		if h.Mode&0o111 == 0 {
			return fmt.Errorf("%s is not executable (mode %o)", binaryPath, h.Mode)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		return checkStatic(bytes.NewReader(data), arch)
	}
}

// checkStatic fails unless the binary is an ELF executable for arch that
// needs no dynamic loader: the base has no libc.
func checkStatic(r io.ReaderAt, arch string) error {
	f, err := elf.NewFile(r)
	if err != nil {
		return fmt.Errorf("not an ELF binary: %w", err)
	}
	defer f.Close()
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390}
	if want, ok := machines[arch]; !ok || f.Machine != want {
		return fmt.Errorf("built for %s, the image is for %s", f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked (it needs a loader and libc): build it with CGO_ENABLED=0")
		}
	}
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH, or the Unix epoch: the same binary makes
// the same image.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
