package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// apply returns the mutated content of every file m edits, by absolute
// path. It fails when a snippet does not occur exactly once in its file:
// then the catalogue has drifted from the code.
func (m mutant) apply(root string) (map[string]string, error) {
	files := map[string]string{}
	for i, s := range m.Sites {
		path := filepath.Join(root, filepath.FromSlash(s.File))
		src, ok := files[path]
		if !ok {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("mutant %s, site %d: %w", m.ID, i+1, err)
			}
			src = string(b)
		}
		if n := strings.Count(src, s.Old); n != 1 {
			return nil, fmt.Errorf("mutant %s, site %d: its snippet occurs %d times in %s (want exactly once; "+
				"update mutants/catalogue.go to the code):\n%s", m.ID, i+1, n, s.File, indent(s.Old))
		}
		files[path] = strings.Replace(src, s.Old, s.New, 1)
	}
	return files, nil
}

func indent(s string) string {
	return "\t| " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t| ")
}

// writeOverlay writes the mutated files and a go -overlay file that puts
// them in place of the originals into dir; it returns the overlay's path.
func writeOverlay(dir string, files map[string]string) (string, error) {
	overlay := struct{ Replace map[string]string }{Replace: map[string]string{}}
	i := 0
	for path, content := range files {
		i++
		copyPath := filepath.Join(dir, fmt.Sprintf("%d-%s", i, filepath.Base(path)))
		if err := os.WriteFile(copyPath, []byte(content), 0o600); err != nil {
			return "", err
		}
		overlay.Replace[path] = copyPath
	}
	b, err := json.Marshal(overlay)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, b, 0o600)
}
