// Package http2 gives the pacer's RoundTripper a type name net/http's Client recognises as a
// transport that honours request contexts ("*http2.Transport", as golang.org/x/net/http2's; see
// knownRoundTripperImpl in net/http/client.go). For such a transport, a Client with a Timeout (Colly's
// has 10 s) puts the deadline on the request's context. For any other RoundTripper it also starts,
// per request, a goroutine, a timer and a cancel channel for the deprecated Request.Cancel: some
// microseconds of CPU a request that the pacer, which passes the context on to its inner transport
// and waits on it, does not need.
package http2

import "net/http"

// Transport is a RoundTripper under the type name net/http trusts to honour request contexts.
type Transport struct {
	http.RoundTripper
}
