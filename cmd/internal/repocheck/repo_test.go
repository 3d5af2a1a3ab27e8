package repocheck

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot returns the repository's root: the directory holding go.work, two levels above the cmd
// module's root (go test runs in this package's directory, cmd/internal/repocheck).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("repository root not found above %s: %v", root, err)
	}
	return root
}

// workspaceModule is a module of the repository, as `go list -m -json` in the workspace names it.
type workspaceModule struct {
	Path string
	Dir  string
}

// workspaceModules returns the modules go.work ties together.
func workspaceModules(t *testing.T, root string) []workspaceModule {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-json")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m -json in %s: %v", root, err)
	}
	var mods []workspaceModule
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var m workspaceModule
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		mods = append(mods, m)
	}
	return mods
}
