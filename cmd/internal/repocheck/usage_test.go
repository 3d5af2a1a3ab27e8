package repocheck

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandsHelpExitsZeroAndNamesTheCommand checks every command of the repository the same way: -h
// prints a usage that names the command (not the path of the binary: `go run` builds it in a
// temporary directory), and exits 0, as a request for help is not a failure.
func TestCommandsHelpExitsZeroAndNamesTheCommand(t *testing.T) {
	root := repoRoot(t)
	for _, dir := range []string{"cmd/costbench", "cmd/pacebench", "cmd/pacereport", "cmd/queuebench", "example_crawler"} {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "exe", name) // where go run puts it
			build := exec.Command("go", "build", "-o", bin, ".")
			build.Dir = filepath.Join(root, dir)
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			out, err := exec.Command(bin, "-h").CombinedOutput()
			var exit *exec.ExitError
			switch {
			case errors.As(err, &exit):
				t.Errorf("-h: exit status %d, want 0:\n%s", exit.ExitCode(), out)
			case err != nil:
				t.Fatal(err)
			}
			usage := "" // the line saying "usage", with the next (a "Usage:" heading has its lines after it)
			lines := strings.Split(string(out), "\n")
			for i, line := range lines {
				if strings.Contains(strings.ToLower(line), "usage") {
					usage = strings.Join(lines[i:min(i+2, len(lines))], " ")
					break
				}
			}
			if !strings.Contains(strings.ToLower(usage), "usage") || !strings.Contains(usage, name) || strings.Contains(usage, filepath.Dir(bin)) {
				t.Errorf("-h: usage line %q, want one naming %s, not the binary's path", usage, name)
			}
		})
	}
}
