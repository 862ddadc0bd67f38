// Package atomicfile writes files so that a reader sees the old content or the
// new, never half: the harness may be killed at any moment, and its results and
// cache manifests must stay readable.
package atomicfile

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// Write writes b to a temporary file beside path, syncs it and renames it over
// path.
func Write(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteJSON writes v as indented JSON with a final newline, atomically
// (Write): every result file of the harness is written so.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return Write(path, append(b, '\n'))
}
