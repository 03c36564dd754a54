package main

import (
	"archive/tar"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// write puts idx into a fresh OCI layout at dir, named ref
// (org.opencontainers.image.ref.name: options.refName), and tars that
// layout into tarPath with every entry dated mtime (the image's creation
// time).
func write(idx v1.ImageIndex, ref, dir, tarPath string, mtime time.Time) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return err
	}
	return tarDir(dir, tarPath, mtime)
}

// tarDir writes the files under dir into a tar at out, paths relative to
// dir, in lexical order. Each entry is dated mtime, owned by 0:0, mode
// 0644 (0755 for directories), with no access or change time, so two
// builds of one release give the same archive byte for byte.
func tarDir(dir, out string, mtime time.Time) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), 0, 0, "", ""
		h.ModTime, h.AccessTime, h.ChangeTime, h.Format = mtime, time.Time{}, time.Time{}, tar.FormatUSTAR
		h.Mode = 0o644
		if d.IsDir() {
			h.Name += "/"
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}
