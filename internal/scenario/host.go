package scenario

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// SentHeader is the request header in which a client may state when it handed the request to its
// transport, as Unix nanoseconds on its wall clock (the same machine's clock as the host's): a
// measurement can then tell a request already on its way when a refusal was answered from one sent
// after it. The host logs it in Arrival.Sent.
const SentHeader = "X-Scenario-Sent"

// Arrival is one request as the server saw it.
type Arrival struct {
	At     time.Time // when the request reached the handler, on the local (unskewed) clock
	Path   string
	Status int       // the status written; 0 if the response was never written (host closed, client gone)
	Sent   time.Time // the client's SentHeader; zero when absent or malformed
	// QueueWait is how long a page waited for a free worker before its service (HostConfig.Workers);
	// 0 without workers. It is booked at arrival, so a page cut short still shows its turn.
	QueueWait time.Duration
}

// Window is a Retry-After the host announced: a client should send nothing before Until.
type Window struct {
	Issued time.Time // when the refusal was decided, local clock
	Until  time.Time // when the announced wait ends, local clock (an HTTP-date minus the skew)
	Path   string    // of the refused request
	Status int       // 429 or 503
	// Answered is when the refusal's response was written, local clock: a request the client sent
	// before it was already on its way. Zero until then.
	Answered time.Time
}

// Host is a running scenario server on 127.0.0.1. Its methods are safe for concurrent use.
type Host struct {
	url       string
	srv       *http.Server
	done      chan struct{} // closed by Close: cuts latency waits short
	serveDone chan struct{} // closed when Serve returns
	closeOnce sync.Once

	mu       sync.Mutex // protects the fields below
	closed   bool
	handlers sync.WaitGroup // running handlers; Add only under mu while !closed
	st       *state
	arrivals []Arrival
}

// Start starts a host listening on 127.0.0.1 on a free port. Close it when done.
func Start(cfg HostConfig) (*Host, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("scenario: listen: %w", err)
	}
	h := &Host{
		url:       "http://" + ln.Addr().String(),
		done:      make(chan struct{}),
		serveDone: make(chan struct{}),
		st:        newState(cfg),
	}
	h.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(h.serveDone)
		_ = h.srv.Serve(ln) // returns http.ErrServerClosed after Close, or an accept error
	}()
	return h, nil
}

// URL returns the base URL, "http://127.0.0.1:PORT" (no trailing slash).
func (h *Host) URL() string { return h.url }

// Key returns "127.0.0.1:PORT", the URL.Host a pacer keys this host by.
func (h *Host) Key() string { return h.url[len("http://"):] }

// PageURL returns the absolute URL of page i.
func (h *Host) PageURL(i int) string { return h.url + PagePath(i) }

// Config returns the host's configuration with defaults filled in.
func (h *Host) Config() HostConfig {
	cfg, _ := h.st.cfg.normalized() // copies the pointers and the slice
	return cfg
}

// Name returns the configured name.
func (h *Host) Name() string { return h.st.cfg.Name }

// Pages returns the number of pages.
func (h *Host) Pages() int { return h.st.cfg.Pages }

// Arrivals returns a copy of the arrival log, sorted by arrival time.
func (h *Host) Arrivals() []Arrival {
	h.mu.Lock()
	a := slices.Clone(h.arrivals)
	h.mu.Unlock()
	slices.SortStableFunc(a, func(x, y Arrival) int { return x.At.Compare(y.At) })
	return a
}

// Windows returns a copy of the Retry-After windows announced, in the order issued.
func (h *Host) Windows() []Window {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.st.windows)
}

// Close stops the host: waits in progress are cut short (their arrivals are logged with status 0),
// connections are closed, and Close returns once every handler and the server goroutine have
// returned. The logs stay readable. Close is idempotent.
func (h *Host) Close() {
	h.closeOnce.Do(func() {
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
		close(h.done)
		_ = h.srv.Close()
		h.handlers.Wait()
		<-h.serveDone
	})
}

// ServeHTTP answers one request and logs its arrival.
func (h *Host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.handlers.Add(1)
	windows := len(h.st.windows)
	rep := h.st.decideAt(now, r.URL.Path)
	window := -1
	if len(h.st.windows) > windows {
		window = len(h.st.windows) - 1
	}
	h.mu.Unlock()
	defer h.handlers.Done()

	status := rep.status
	if rep.hang > 0 {
		h.sleep(r.Context(), rep.hang) // a timeout: nothing is answered, the connection is dropped below
	} else if wait := rep.queueWait + rep.latency; wait > 0 {
		if !h.sleep(r.Context(), wait) {
			status = 0
		}
		rep.header.Set("Date", httpDate(h.st.serverTime(time.Now())))
	}
	h.mu.Lock()
	h.arrivals = append(h.arrivals, Arrival{At: now, Path: r.URL.Path, Status: status, Sent: sentAt(r.Header), QueueWait: rep.queueWait})
	h.mu.Unlock()
	if status == 0 {
		// Returning would send an implicit 200; abort the connection instead (not logged by net/http).
		panic(http.ErrAbortHandler)
	}
	for k, v := range rep.header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = w.Write(rep.body)
	if window >= 0 {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		answered := time.Now()
		h.mu.Lock()
		h.st.windows[window].Answered = answered
		h.mu.Unlock()
	}
}

// sentAt parses the SentHeader of a request; zero when absent or malformed.
func sentAt(h http.Header) time.Time {
	v := h.Get(SentHeader)
	if v == "" {
		return time.Time{}
	}
	ns, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ns <= 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// sleep waits d, and reports false if the request or the host ended first.
func (h *Host) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-h.done:
	}
	return false
}
