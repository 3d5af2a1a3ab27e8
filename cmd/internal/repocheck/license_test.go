package repocheck

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/licensecheck"
)

// minCoverage is the share of a LICENSE's words, in percent, that the Apache-2.0 text must account
// for: all of them, so that nothing added to it (an extra clause, another license) goes unseen.
const minCoverage = 100

// assertApache2 fails unless text is classified as the Apache License 2.0 and nothing else.
func assertApache2(t *testing.T, name string, text []byte) {
	t.Helper()
	cov := licensecheck.Scan(text)
	if len(cov.Match) != 1 || cov.Match[0].ID != "Apache-2.0" {
		t.Errorf("%s: licensecheck found %+v, want the one match Apache-2.0", name, cov.Match)
	}
	if cov.Percent < minCoverage {
		t.Errorf("%s: the license accounts for %.1f%% of the text, want at least %d%%", name, cov.Percent, minCoverage)
	}
}

// TestLicenseIsApache2 checks that the repository's LICENSE is the Apache License 2.0 as
// github.com/google/licensecheck (the classifier pkg.go.dev uses) reads it.
func TestLicenseIsApache2(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(repoRoot(t), "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	assertApache2(t, "LICENSE", text)
}

// TestEveryModuleIsLicensedApache2 checks that every module of the workspace publishes the Apache-2.0
// LICENSE at the root of its module zip, where pkg.go.dev looks for it. A module in a subdirectory
// that has no LICENSE of its own gets the repository root's: the go command, which builds the zips
// the module proxy serves, copies it in (cmd/go/internal/modfetch's zip of a subdirectory module,
// as golang.org/x/mod/zip.CreateFromVCS does). So a nested module must have either no LICENSE (the
// root's applies) or an Apache-2.0 one.
func TestEveryModuleIsLicensedApache2(t *testing.T) {
	root := repoRoot(t)
	mods := workspaceModules(t, root)
	if len(mods) < 3 {
		t.Fatalf("go.work ties %d modules, want the library, cmd and example_crawler: %+v", len(mods), mods)
	}
	for _, m := range mods {
		license := filepath.Join(m.Dir, "LICENSE")
		text, err := os.ReadFile(license)
		if errors.Is(err, fs.ErrNotExist) && m.Dir != root {
			license = filepath.Join(root, "LICENSE") // what the go command puts in the zip
			text, err = os.ReadFile(license)
		}
		if err != nil {
			t.Errorf("%s: %v", m.Path, err)
			continue
		}
		rel, _ := filepath.Rel(root, license)
		assertApache2(t, m.Path+" (its zip's LICENSE is "+rel+")", text)
	}
}
