package ext

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxRootNames is the root package's budget of exported names: 80 until issues 27 and 28 added
// Queue.AddNewURL (whether a URL was new to a fleet's frontier) and WithAuditWriter (a trail whose
// failed writes raise an alert), both things a user reads or sets; 81 until issue 33 added Lease (a
// frontier's lease with its fencing token, which a Frontier grants and checks at admission) and
// ErrLeaseLost (what OnError sees for a request not sent because its lease had passed on). A store
// that keeps a record of its pacers does so through methods an unexported interface names.
const maxRootNames = 83

// The root package stays small: at most maxRootNames exported identifiers (package-level names, and the methods
// of exported types), what a user sets or reads; the audit vocabulary lives in package audit.
func TestRootAPIStaysSmall(t *testing.T) {
	fset := token.NewFileSet()
	paths, _ := filepath.Glob("*.go")
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pkg, err := doc.NewFromFiles(fset, files, "github.com/collypace/ext")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			names = append(names, v.Names...)
		}
	}
	values(pkg.Consts)
	values(pkg.Vars)
	for _, f := range pkg.Funcs {
		names = append(names, f.Name)
	}
	for _, ty := range pkg.Types {
		names = append(names, ty.Name)
		values(ty.Consts)
		values(ty.Vars)
		for _, f := range ty.Funcs {
			names = append(names, f.Name)
		}
		for _, m := range ty.Methods {
			names = append(names, ty.Name+"."+m.Name)
		}
	}
	if len(names) > maxRootNames {
		t.Errorf("%d exported identifiers in the root package, want at most %d: %v", len(names), maxRootNames, names)
	}
	if len(names) < 40 {
		t.Errorf("%d names found: the count is broken", len(names))
	}
}
