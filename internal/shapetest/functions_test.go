package shapetest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// maxLines is the most lines a function's body may have (between its
// braces, blank lines and comments included): a function a reader takes in
// in one sitting. etcd's concurrency package, the anchor for the SDK, has
// none over 73 (STYLE.md, "Small units").
const maxLines = 60

// maxParams is the most parameters a function may take (the receiver not
// counted; a variadic one counts once): more want a small config value
// (STYLE.md, "Few parameters, few fields").
const maxParams = 6

// dirs are the directories held to maxLines and maxParams, relative to the
// repository root, each with its subdirectories: what ships.
var dirs = []string{"s3lock", "internal/provider", "internal/runguard", "cmd/s3lock"}

// pending are the directories of dirs not yet held to the limits, with why.
// Their offenders are logged, not failed: `go test -v -run TestFunctions
// ./internal/shapetest` lists them. Delete an entry to hold its directory to
// the limits.
var pending = map[string]string{}

// TestFunctions_ShortWithFewParameters: no function body in dirs is longer
// than maxLines and none takes more than maxParams parameters, in the
// non-test .go files of every platform. Definitions aside: the lines of a
// command's or a schema's composite literal do not count (see
// definitionLines), the code of the functions inside them does.
func TestFunctions_ShortWithFewParameters(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			offenders := check(t, root, dir)
			if reason, ok := pending[dir]; ok {
				for _, o := range offenders {
					t.Log(o)
				}
				if len(offenders) == 0 {
					t.Skipf("no offenders: delete %q from pending to hold it to the limits", dir)
				}
				t.Skipf("%d offenders, not failed: %s", len(offenders), reason)
			}
			for _, o := range offenders {
				t.Error(o)
			}
		})
	}
}

// TestFunctions_DefinitionsAside: the exemption is as narrow as it says. A
// cobra.Command or schema literal counts as its first line; a function
// literal inside it (a RunE) counts in full; a literal of any other type
// counts in full.
func TestFunctions_DefinitionsAside(t *testing.T) {
	long := strings.Repeat("\t\tShort: \"x\",\n", 70)
	code := strings.Repeat("\t\t\tprintln()\n", 70)
	other := strings.Repeat("\t\t\"x\",\n", 70)
	src := `package p

import (
	"github.com/spf13/cobra"
	rs "github.com/hashicorp/terraform-plugin-framework/resource/schema"
)

func command() *cobra.Command {
	return &cobra.Command{
` + long + `	}
}

func schemaOf(resp *struct{ Schema rs.Schema }) {
	resp.Schema = rs.Schema{Attributes: map[string]rs.Attribute{
` + strings.Repeat("\t\t\"a\": rs.StringAttribute{},\n", 70) + `	}}
}

func commandWithCode() *cobra.Command {
	return &cobra.Command{
		RunE: func(*cobra.Command, []string) error {
` + code + `			return nil
		},
	}
}

func strings() []string {
	return []string{
` + other + `	}
}

func params(a, b, c int, d string, e, f bool, g ...int) {}

func six(a, b, c, d, e, f int) {
	_ = func(a, b, c, d, e, f, g int) {}
}

var handler = func(a, b, c, d, e, f, g int) {}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fn := range functions(fset, f) {
		if fn.lines > maxLines || fn.params > maxParams {
			got = append(got, fn.name)
		}
	}
	if want := []string{"commandWithCode", "strings", "params", "func literal", "var handler"}; !slices.Equal(got, want) {
		t.Errorf("offenders: %q, want %q", got, want)
	}
}

// function is one function of a file, measured.
type function struct {
	name     string // Recv.Name for a method, "var NAME" for a package-level function literal
	pos      token.Position
	body     int // lines between the braces of its body
	lines    int // of those, the ones that count: body less its definitions
	params   int
	literals bool // whether definitions were set aside
}

func (fn function) String() string {
	lines := fmt.Sprintf("%d lines", fn.body)
	if fn.literals {
		lines = fmt.Sprintf("%d lines (%d counted, definitions aside)", fn.body, fn.lines)
	}
	return fmt.Sprintf("%s:%d: %s: %s, parameters: %d (limits: %d lines, %d parameters)",
		filepath.ToSlash(fn.pos.Filename), fn.pos.Line, fn.name, lines, fn.params, maxLines, maxParams)
}

// check returns the functions of the non-test .go files under dir (below
// root) over the limits, in file and line order.
func check(t *testing.T, root, dir string) []function {
	t.Helper()
	fset := token.NewFileSet()
	var offenders []function
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "testdata":
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		for _, fn := range functions(fset, f) {
			if fn.lines > maxLines || fn.params > maxParams {
				offenders = append(offenders, fn)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(offenders) == 0 && !hasGo(t, filepath.Join(root, dir)) {
		t.Fatalf("%s: no .go files: is dirs up to date?", dir)
	}
	return offenders
}

// hasGo reports whether dir holds a .go file.
func hasGo(t *testing.T, dir string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	return len(files) > 0
}

// functions measures the functions of f: its declarations and the function
// literals of its package-level variables (their length), and every function
// literal's parameters.
func functions(fset *token.FileSet, f *ast.File) []function {
	imports := importPaths(f)
	var out []function
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if decl.Body != nil {
				out = append(out, measure(fset, imports, declName(decl), decl.Pos(), decl.Type, decl.Body))
			}
			out = append(out, literalParams(fset, decl.Body)...)
		case *ast.GenDecl:
			ast.Inspect(decl, func(n ast.Node) bool {
				if lit, ok := n.(*ast.FuncLit); ok {
					out = append(out, measure(fset, imports, "var "+varName(decl, lit), lit.Pos(), lit.Type, lit.Body))
					out = append(out, literalParams(fset, lit.Body)...)
					return false
				}
				return true
			})
		}
	}
	return out
}

// literalParams measures the parameters of the function literals in body
// (their lines count in the function around them).
func literalParams(fset *token.FileSet, body *ast.BlockStmt) []function {
	if body == nil {
		return nil
	}
	var out []function
	ast.Inspect(body, func(n ast.Node) bool {
		if lit, ok := n.(*ast.FuncLit); ok && params(lit.Type) > maxParams {
			out = append(out, function{name: "func literal", pos: fset.Position(lit.Pos()), params: params(lit.Type)})
		}
		return true
	})
	return out
}

// measure measures one function body.
func measure(fset *token.FileSet, imports map[string]string, name string, pos token.Pos, typ *ast.FuncType, body *ast.BlockStmt) function {
	first, last := fset.Position(body.Lbrace).Line, fset.Position(body.Rbrace).Line
	fn := function{name: name, pos: fset.Position(pos), params: params(typ), body: max(0, last-first-1)}
	aside := definitionLines(fset, imports, body)
	fn.lines = fn.body - len(aside)
	fn.literals = len(aside) > 0
	return fn
}

// params counts a function's parameters: each name, or each unnamed type.
func params(typ *ast.FuncType) int {
	n := 0
	for _, field := range typ.Params.List {
		n += max(1, len(field.Names))
	}
	return n
}

// definitionLines returns the lines of body that do not count: "schema,
// attribute and command definitions aside" (issue 37). A definition is a
// composite literal of cobra.Command, or of a type of a
// terraform-plugin-framework schema package (a schema.Schema, its
// attributes, blocks and nested objects, or a map of them), and its lines
// are set aside but the first; the lines of a function literal inside one
// (a command's RunE or Args) count, as code, and so on down: a line counts
// as the innermost definition or function literal that spans it says, a
// definition's line being set aside below its first line or when an outer
// definition sets it aside.
func definitionLines(fset *token.FileSet, imports map[string]string, body *ast.BlockStmt) map[int]bool {
	type region struct {
		start, end token.Position
		definition bool
	}
	var regions []region // outermost first: ast.Inspect visits parents first
	inDefinition := 0
	var stack []bool // whether each node visited is a definition
	ast.Inspect(body, func(n ast.Node) bool {
		if n == nil {
			if stack[len(stack)-1] {
				inDefinition--
			}
			stack = stack[:len(stack)-1]
			return true
		}
		def := false
		switch n := n.(type) {
		case *ast.CompositeLit:
			def = isDefinition(imports, n.Type)
		case *ast.FuncLit:
			if inDefinition > 0 {
				regions = append(regions, region{fset.Position(n.Pos()), fset.Position(n.End()), false})
			}
		}
		if def {
			inDefinition++
			regions = append(regions, region{fset.Position(n.Pos()), fset.Position(n.End()), true})
		}
		stack = append(stack, def)
		return true
	})
	aside := map[int]bool{}
	first, last := fset.Position(body.Lbrace).Line, fset.Position(body.Rbrace).Line
	for line := first + 1; line < last; line++ {
		for _, r := range regions { // outer to inner
			if r.start.Line <= line && line <= r.end.Line {
				aside[line] = r.definition && (aside[line] || line > r.start.Line)
			}
		}
		if !aside[line] {
			delete(aside, line)
		}
	}
	return aside
}

// isDefinition reports whether a composite literal's type is a definition's:
// cobra.Command, a type of a terraform-plugin-framework schema package, or
// a map whose values are one.
func isDefinition(imports map[string]string, typ ast.Expr) bool {
	if m, ok := typ.(*ast.MapType); ok {
		typ = m.Value
	}
	sel, ok := typ.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return false
	}
	path := imports[pkg.Name]
	switch {
	case path == "github.com/spf13/cobra":
		return sel.Sel.Name == "Command"
	case strings.HasPrefix(path, "github.com/hashicorp/terraform-plugin-framework/"):
		return strings.HasSuffix(path, "/schema")
	}
	return false
}

// importPaths maps the names f refers to its imports by to their paths.
func importPaths(f *ast.File) map[string]string {
	m := map[string]string{}
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		m[name] = path
	}
	return m
}

// declName is a function's name, Recv.Name for a method.
func declName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	if idx, ok := typ.(*ast.IndexListExpr); ok {
		typ = idx.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// varName is the name of the package-level variable whose value holds lit.
func varName(decl *ast.GenDecl, lit *ast.FuncLit) string {
	for _, spec := range decl.Specs {
		vs, ok := spec.(*ast.ValueSpec)
		if !ok {
			continue
		}
		for i, v := range vs.Values {
			if v.Pos() <= lit.Pos() && lit.End() <= v.End() && i < len(vs.Names) {
				return vs.Names[i].Name
			}
		}
	}
	return "?"
}
