package ext

import (
	"net/url"
	"testing"
)

// Every spelling of one host maps to one schedule.
func TestDefaultHostKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://example.org/a", "example.org"},
		{"http://EXAMPLE.org:80/a", "example.org"},
		{"https://example.org:443/", "example.org"},
		{"http://example.org.:8080/", "example.org:8080"},
		{"https://example.org:80/", "example.org:80"},
		{"http://bücher.test/", "xn--bcher-kva.test"},
		{"http://XN--BCHER-KVA.test/", "xn--bcher-kva.test"},
		{"http://user:secret@example.org/", "example.org"},
		{"http://[::1]:8080/", "[::1]:8080"},
		{"http://[::1]/", "[::1]"},
		{"http://127.0.0.1:9000/", "127.0.0.1:9000"},
	} {
		u, err := url.Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := DefaultHostKey(u); got != tc.want {
			t.Errorf("DefaultHostKey(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
