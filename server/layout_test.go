package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// layers are the package's files in the order they build on each other
// (the package doc lists them): a file refers only to files of its own
// layer or an earlier one, and to the hub, server.go's Server. A reader of
// the stream finds no handler in it, and a change to a route cannot reach
// into the turn log.
var layers = [][]string{
	{"errors.go", "config.go", "security.go", "rawerrors.go", "otel.go"},
	{"uistream.go"},
	{"stream.go", "idempotency.go"},
	{"chat.go", "sessions.go", "resume.go", "info.go", "openapi.go", "webhook.go", "outbox.go"},
	{"server.go"},
}

// hub is what every file may use of server.go.
var hub = []string{"Server", "ownerOf"}

// TestFilesBuildOnEachOther checks the layers by the package-level names a
// file uses that another file declares (its unresolved identifiers) and by
// the Server's methods it calls (s.name, s being every Server method's
// receiver; the other types' methods are reached through their types,
// which are seen).
func TestFilesBuildOnEachOther(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	layer := map[string]int{}
	for i, l := range layers {
		for _, f := range l {
			layer[f] = i
		}
	}
	declared := map[string]string{} // name -> file
	methods := map[string]string{}  // method of Server -> file
	files := map[string]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		if _, ok := layer[name]; !ok {
			t.Errorf("%s is in no layer: add it to layers and to the package doc", name)
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declared[d.Name.Name] = name
				} else if onServer(d.Recv) {
					methods[d.Name.Name] = name
					if n := d.Recv.List[0].Names; len(n) != 1 || n[0].Name != "s" {
						t.Errorf("%s: the Server's receiver is named s, which the check of its calls relies on", fset.Position(d.Pos()))
					}
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						declared[s.Name.Name] = name
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declared[n.Name] = name
						}
					}
				}
			}
		}
	}
	for name, f := range files {
		for _, id := range f.Unresolved {
			in, ok := declared[id.Name]
			if !ok || in == name || layer[in] <= layer[name] || in == "server.go" && slices.Contains(hub, id.Name) {
				continue
			}
			t.Errorf("%s: %s refers to %s of %s, a later layer", fset.Position(id.Pos()), name, id.Name, in)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "s" {
				return true
			}
			in, ok := methods[sel.Sel.Name]
			if ok && layer[in] > layer[name] && in != "server.go" {
				t.Errorf("%s: %s calls Server.%s of %s, a later layer", fset.Position(sel.Sel.Pos()), name, sel.Sel.Name, in)
			}
			return true
		})
	}
}

// onServer reports whether a method's receiver is the Server.
func onServer(recv *ast.FieldList) bool {
	if len(recv.List) != 1 {
		return false
	}
	typ := recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.Name == "Server"
}
