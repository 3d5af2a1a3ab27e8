// Package repocheck checks the repository as it is published rather than any code: the license that
// pkg.go.dev reads from each module, and the README's `go install` lines. It has no code of its own,
// only tests. It lives in the cmd module so that the license classifier its tests use
// (github.com/google/licensecheck) is a requirement of the commands' module, never of the library's:
// a user who imports github.com/collypace/ext does not get it in their module graph.
package repocheck
