package repocheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// trackerName matches a name that says where something came from in the tracker ("issue16",
// "Issue10Item5", "item_3") rather than what it proves.
var trackerName = regexp.MustCompile(`(?i)(issue|item)[_ -]?[0-9]`)

// testFunc matches the declaration of a test, benchmark, fuzz test or example.
var testFunc = regexp.MustCompile(`(?m)^func ((Test|Benchmark|Fuzz|Example)\w*)\(`)

// No file, and no test, benchmark, fuzz test or example, is named after a tracker item: a failing
// test's name must tell its reader what broke.
func TestNoNameRefersToATrackerItem(t *testing.T) {
	root := repoRoot(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		if trackerName.MatchString(d.Name()) {
			t.Errorf("%s is named after a tracker item", rel)
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
			if trackerName.MatchString(m[1]) {
				t.Errorf("%s: %s is named after a tracker item", rel, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
