package repocheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// installLine matches a `go install <package>@latest` line of the README, capturing the package.
var installLine = regexp.MustCompile(`(?m)^\s*go install ([^\s@]+)@latest\b`)

// holdingModule returns the module whose path is the longest prefix of pkg: the one that holds it.
func holdingModule(mods []workspaceModule, pkg string) (workspaceModule, bool) {
	var best workspaceModule
	for _, m := range mods {
		if (pkg == m.Path || strings.HasPrefix(pkg, m.Path+"/")) && len(m.Path) > len(best.Path) {
			best = m
		}
	}
	return best, best.Path != ""
}

// TestReadmeInstallLinesNameMainPackages checks that every `go install …@latest` line in the README
// names a main package of the module that holds it: `go list` run inside that module, on its own
// go.mod (GOWORK=off), finds the package there and calls it main.
func TestReadmeInstallLinesNameMainPackages(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := installLine.FindAllStringSubmatch(string(readme), -1)
	if len(lines) == 0 {
		t.Fatal("the README has no `go install …@latest` line")
	}
	mods := workspaceModules(t, root)
	for _, l := range lines {
		pkg := l[1]
		m, ok := holdingModule(mods, pkg)
		if !ok {
			t.Errorf("go install %s@latest: no module of this repository holds %s", pkg, pkg)
			continue
		}
		cmd := exec.Command("go", "list", "-f", "{{.Name}} {{.Module.Path}}", pkg)
		cmd.Dir = m.Dir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("go install %s@latest: go list in %s: %v\n%s", pkg, m.Dir, err, out)
			continue
		}
		if got, want := strings.TrimSpace(string(out)), "main "+m.Path; got != want {
			t.Errorf("go install %s@latest: go list in %s says %q (package name, module), want %q", pkg, m.Dir, got, want)
		}
	}
}
