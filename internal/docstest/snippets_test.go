package docstest

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/s3lock/terraform-provider-s3lock/internal/testkit/tfharness"
)

// snippet is one ```go block of a Markdown file.
type snippet struct {
	file string // relative to the repository root
	line int    // of the opening fence
	code string
}

// skipDirs are not searched for Markdown: generated copies (docs/ is made
// from templates/, which are searched), build output and dependencies.
var skipDirs = []string{".git", "docs", "bin", "dist", "scratch", ".local", "node_modules", ".terraform"}

// params are the names a snippet may use without declaring them: the
// context, an AWS configuration and an S3 client, and the work a lock guards.
const params = "ctx context.Context, cfg aws.Config, api *s3.Client, migrate func(context.Context, uint64) error"

// imports are the packages a snippet may use, by the name it uses them by;
// context, aws and s3 are always imported (params uses them).
var imports = map[string]string{
	"context":    "context",
	"time":       "time",
	"aws":        "github.com/aws/aws-sdk-go-v2/aws",
	"config":     "github.com/aws/aws-sdk-go-v2/config",
	"s3":         "github.com/aws/aws-sdk-go-v2/service/s3",
	"s3lock":     "github.com/s3lock/terraform-provider-s3lock/s3lock",
	"s3lockotel": "github.com/s3lock/terraform-provider-s3lock/s3lockotel",
}

// TestSnippets_Compile: every Go snippet of the repository's Markdown (the
// README's, the CLI's, the templates of the guides) compiles against the
// SDK as it is. A snippet that is not a whole file is the body of a function
// that returns an error and gets params; the variables it declares may go
// unused. A snippet that uses s3lockotel compiles in that module (its own,
// beside the SDK's).
func TestSnippets_Compile(t *testing.T) {
	t.Parallel()
	root, err := tfharness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	snippets := findSnippets(t, root)
	if len(snippets) == 0 {
		t.Fatal("no ```go block in any Markdown file: is the search broken?")
	}
	for _, s := range snippets {
		t.Run(fmt.Sprintf("%s:%d", s.file, s.line), func(t *testing.T) {
			t.Parallel()
			src, err := program(s.code)
			if err != nil {
				t.Fatalf("%s:%d: %v\n%s", s.file, s.line, err, s.code)
			}
			module := root
			if strings.Contains(s.code, "s3lockotel.") {
				module = filepath.Join(root, "s3lockotel")
			}
			path := filepath.Join(t.TempDir(), "snippet.go")
			if err := os.WriteFile(path, src, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(t.Context(), "go", "build", "-o", os.DevNull, path)
			cmd.Dir = module
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("the Go snippet at %s:%d does not compile (%v):\n%s\nas compiled:\n%s", s.file, s.line, err, out, numbered(src))
			}
		})
	}
}

// fence opens or closes a Markdown code block, possibly indented (in a list).
var fence = regexp.MustCompile("^( *)```(\\S*)\\s*$")

// findSnippets returns the ```go blocks of every Markdown file (and
// Markdown template) under root.
func findSnippets(t *testing.T, root string) []snippet {
	t.Helper()
	var out []snippet
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && slices.Contains(skipDirs, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") && !strings.HasSuffix(path, ".md.tmpl") {
			return nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		out = append(out, goBlocks(rel, string(text))...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// goBlocks returns the ```go blocks of one Markdown text, their indentation
// removed.
func goBlocks(file, text string) []snippet {
	var out []snippet
	var cur *snippet
	indent := ""
	for i, line := range strings.Split(text, "\n") {
		m := fence.FindStringSubmatch(line)
		switch {
		case cur == nil && m != nil && m[2] == "go":
			cur, indent = &snippet{file: file, line: i + 1}, m[1]
		case cur != nil && m != nil && m[2] == "":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += strings.TrimPrefix(line, indent) + "\n"
		}
	}
	return out
}

// program turns a snippet into a Go file: a whole file as it is, otherwise
// the body of a function with params, with the packages it names imported
// and every variable it declares used.
func program(code string) ([]byte, error) {
	if strings.HasPrefix(strings.TrimSpace(code), "package ") {
		return []byte(code), nil
	}
	var b bytes.Buffer
	b.WriteString("package main\n\nimport (\n")
	for name, path := range imports {
		if name == "context" || name == "aws" || name == "s3" || strings.Contains(code, name+".") {
			fmt.Fprintf(&b, "\t%s %q\n", name, path)
		}
	}
	fmt.Fprintf(&b, ")\n\nfunc main() {}\n\nfunc snippet(%s) error {\n", params)
	head := b.Len()
	b.WriteString(code)
	// Parse once to find what the snippet declares at its top level.
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "snippet.go", b.String()+"return nil\n}\n", 0)
	if err != nil {
		return nil, fmt.Errorf("not Go (%w); the snippet starts at byte %d", err, head)
	}
	for _, name := range declared(f) {
		fmt.Fprintf(&b, "_ = %s\n", name)
	}
	b.WriteString("return nil\n}\n")
	return b.Bytes(), nil
}

// declared returns the names the function snippet declares in its own
// scope with := or var.
func declared(f *ast.File) []string {
	var names []string
	add := func(id *ast.Ident) {
		if id.Name != "_" && !slices.Contains(names, id.Name) {
			names = append(names, id.Name)
		}
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "snippet" {
			continue
		}
		for _, st := range fn.Body.List {
			switch st := st.(type) {
			case *ast.AssignStmt:
				if st.Tok == token.DEFINE {
					for _, e := range st.Lhs {
						if id, ok := e.(*ast.Ident); ok {
							add(id)
						}
					}
				}
			case *ast.DeclStmt:
				if g, ok := st.Decl.(*ast.GenDecl); ok {
					for _, spec := range g.Specs {
						if v, ok := spec.(*ast.ValueSpec); ok {
							for _, id := range v.Names {
								add(id)
							}
						}
					}
				}
			}
		}
	}
	return names
}

// numbered returns src with line numbers, as the compiler's errors count.
func numbered(src []byte) string {
	var b strings.Builder
	for i, line := range strings.Split(strings.TrimRight(string(src), "\n"), "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, line)
	}
	return b.String()
}
