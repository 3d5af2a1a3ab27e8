package scenario

import (
	"fmt"
	"html"
	"strconv"
	"strings"
)

// RobotsPath is the path of robots.txt.
const RobotsPath = "/robots.txt"

// PagePath returns the path of page i: "/" for 0, "/p/{i}" otherwise.
func PagePath(i int) string {
	if i == 0 {
		return "/"
	}
	return "/p/" + strconv.Itoa(i)
}

// pageIndex is the inverse of PagePath for a host of n pages; ok is false for any other path.
func pageIndex(path string, n int) (i int, ok bool) {
	if path == "/" {
		return 0, n > 0
	}
	rest, found := strings.CutPrefix(path, "/p/")
	if !found {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 1 || i >= n || PagePath(i) != path {
		return 0, false
	}
	return i, true
}

// PageLinks returns the pages page i of n links to: its children k·i+1 … k·i+k of a k-ary tree
// (those below n), then "/" for every page but the root. The tree makes every page reachable from
// "/" within log_k(n) hops, so a crawler following links visits all n, and it fans out quickly
// enough to keep a paced queue busy.
func PageLinks(i, n, k int) []int {
	var links []int
	for c := k*i + 1; c <= k*i+k && c < n; c++ {
		links = append(links, c)
	}
	if i != 0 {
		links = append(links, 0)
	}
	return links
}

// pageBody renders page i of host name as HTML linking to its PageLinks.
func pageBody(name string, i, n, k int) []byte {
	var b strings.Builder
	name = html.EscapeString(name)
	fmt.Fprintf(&b, "<!doctype html>\n<html><head><title>%s page %d</title></head><body>\n", name, i)
	fmt.Fprintf(&b, "<h1>%s: page %d of %d</h1>\n<p>A page of the scenario host %s.</p>\n<ul>\n", name, i, n, name)
	for _, l := range PageLinks(i, n, k) {
		fmt.Fprintf(&b, "<li><a href=\"%s\">page %d</a></li>\n", PagePath(l), l)
	}
	b.WriteString("</ul>\n</body></html>\n")
	return []byte(b.String())
}
