package scenario

import (
	"strings"
	"testing"
)

func TestPageLinksReachAll(t *testing.T) {
	for _, n := range []int{1, 2, 7, 25, 100} {
		for _, k := range []int{1, 2, 3, 5} {
			seen := map[int]bool{0: true}
			queue := []int{0}
			for len(queue) > 0 {
				i := queue[0]
				queue = queue[1:]
				for _, l := range PageLinks(i, n, k) {
					if l < 0 || l >= n {
						t.Fatalf("n=%d k=%d: page %d links to %d", n, k, i, l)
					}
					if !seen[l] {
						seen[l] = true
						queue = append(queue, l)
					}
				}
			}
			if len(seen) != n {
				t.Errorf("n=%d k=%d: reached %d pages", n, k, len(seen))
			}
		}
	}
}

func TestPagePaths(t *testing.T) {
	for i := range 12 {
		if got, ok := pageIndex(PagePath(i), 12); !ok || got != i {
			t.Errorf("round trip of %d: %d %v", i, got, ok)
		}
	}
	for _, p := range []string{"", "/p/", "/p/0", "/p/-1", "/p/+1", "/p/01", "/p/12", "/p/1/", "/index.html"} {
		if _, ok := pageIndex(p, 12); ok {
			t.Errorf("%q is a page", p)
		}
	}
	body := string(pageBody(`<b>`, 1, 12, 3))
	for _, want := range []string{`href="/p/4"`, `href="/p/6"`, `href="/"`, "&lt;b&gt;"} {
		if !strings.Contains(body, want) {
			t.Errorf("page body lacks %s:\n%s", want, body)
		}
	}
}
