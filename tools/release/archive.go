package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// entry is one file of an archive.
type entry struct {
	name   string // in the archive
	src    string // on disk
	binary bool   // the built program (executable)
}

func (e entry) mode() fs.FileMode {
	if e.binary {
		return 0o755
	}
	return 0o644
}

// writeZip writes entries to path with fixed times and modes.
func writeZip(path string, entries []entry, mtime time.Time) error {
	return create(path, func(w io.Writer) error {
		zw := zip.NewWriter(w)
		for _, e := range entries {
			h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: mtime}
			h.SetMode(e.mode())
			fw, err := zw.CreateHeader(h)
			if err != nil {
				return err
			}
			if err := copyFrom(fw, e.src); err != nil {
				return err
			}
		}
		return zw.Close()
	})
}

// writeTarGz writes entries to path with fixed times and modes, no owner,
// and a gzip header without a time or a name.
func writeTarGz(path string, entries []entry, mtime time.Time) error {
	return create(path, func(w io.Writer) error {
		gz, err := gzip.NewWriterLevel(w, gzip.BestCompression)
		if err != nil {
			return err
		}
		tw := tar.NewWriter(gz)
		for _, e := range entries {
			info, err := os.Stat(e.src)
			if err != nil {
				return err
			}
			h := &tar.Header{
				Name: e.name, Mode: int64(e.mode()), Size: info.Size(),
				ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR,
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if err := copyFrom(tw, e.src); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		return gz.Close()
	})
}

// writeSums writes dir/name: the SHA-256 of each of files (in dir), in the
// format of sha256sum and the Terraform Registry, sorted by name.
func writeSums(dir, name string, files []string) error {
	files = slices.Sorted(slices.Values(files))
	return create(filepath.Join(dir, name), func(w io.Writer) error {
		for _, f := range files {
			sum, err := fileSum(filepath.Join(dir, f))
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "%s  %s\n", sum, f); err != nil {
				return err
			}
		}
		return nil
	})
}

// create writes path through write, buffered; a failed write leaves no file.
func create(path string, write func(io.Writer) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	bw := bufio.NewWriter(f)
	if err := write(bw); err != nil {
		return err
	}
	return bw.Flush()
}

func copyFrom(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
