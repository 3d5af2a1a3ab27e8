package ext_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeQuickStartCompiles checks that the README's quick start is docs/quickstart/main.go
// as it is (from its package clause), which `go build ./...` and `go vet ./...` compile, so it
// compiles as pasted, imports included.
func TestReadmeQuickStartCompiles(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("docs/quickstart/main.go")
	if err != nil {
		t.Fatal(err)
	}
	program := string(src[strings.Index(string(src), "package main"):])
	if !strings.Contains(string(readme), "```go\n"+program+"```") {
		t.Errorf("README's quick start is not docs/quickstart/main.go from its package clause:\n%s", program)
	}
	for _, want := range []string{"github.com/gocolly/colly/v2", "Go 1.26", "redis-server"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README does not mention %s", want)
		}
	}
}

// TestRootModuleIsLean checks that the library's go.mod requires only what its packages
// import; the plotting library that the benchmarks and reports use lives in the cmd module.
func TestRootModuleIsLean(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, only := range []string{"gonum.org/v1/plot", "codeberg.org/go-latex", "codeberg.org/go-pdf"} {
		if strings.Contains(string(mod), only) {
			t.Errorf("the library's go.mod requires %s, which only cmd/ uses", only)
		}
	}
}
