package scenario

import (
	"net/http"
	"slices"
	"time"
)

// Model is a host without a server: its decisions and its logs, for a client that carries requests
// itself, such as an in-memory transport in virtual time (testing/synctest), where a 10-minute crawl
// costs seconds. It decides exactly as Host does. It is not safe for concurrent use.
type Model struct {
	st       *state
	arrivals []Arrival
}

// NewModel returns a model of the host cfg describes.
func NewModel(cfg HostConfig) (*Model, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	return &Model{st: newState(cfg)}, nil
}

// Decision is a Model's answer to one request, decided at its arrival.
type Decision struct {
	Status int // 0 for a timeout (Hang)
	Header http.Header
	Body   []byte
	// QueueWait is how long the page waits for a free worker (HostConfig.Workers) before Latency.
	QueueWait time.Duration
	// Latency is the time before the response headers, after QueueWait.
	Latency time.Duration
	// Hang, when positive, answers nothing: the request is held that long, then its connection is
	// dropped (a timeout).
	Hang time.Duration
	// Arrival is the request's index in the arrival log (see Abandon).
	Arrival int
	// Window is the index of the Retry-After window it announced (see AnsweredAt), -1 for none.
	Window int
}

// DecideAt decides the answer to a request for path arriving at now, sent by the client at sent (zero
// when unknown), and logs its arrival with the status decided.
func (m *Model) DecideAt(now time.Time, path string, sent time.Time) Decision {
	windows := len(m.st.windows)
	rep := m.st.decideAt(now, path)
	d := Decision{
		Status: rep.status, Header: rep.header, Body: rep.body,
		QueueWait: rep.queueWait, Latency: rep.latency, Hang: rep.hang,
		Arrival: len(m.arrivals), Window: -1,
	}
	if len(m.st.windows) > windows {
		d.Window = len(m.st.windows) - 1
	}
	m.arrivals = append(m.arrivals, Arrival{At: now, Path: path, Status: rep.status, Sent: sent, QueueWait: rep.queueWait})
	return d
}

// Abandon logs that the response to the request logged at index arrival was never written (the host
// dropped it, or the client went away first): its status becomes 0, as Host logs it.
func (m *Model) Abandon(arrival int) {
	if arrival >= 0 && arrival < len(m.arrivals) {
		m.arrivals[arrival].Status = 0
	}
}

// AnsweredAt records when the refusal that announced window reached the client: a request sent
// before that was already on its way.
func (m *Model) AnsweredAt(window int, at time.Time) {
	if window >= 0 && window < len(m.st.windows) {
		m.st.windows[window].Answered = at
	}
}

// Config returns the host's configuration with defaults filled in.
func (m *Model) Config() HostConfig {
	cfg, _ := m.st.cfg.normalized()
	return cfg
}

// Arrivals returns a copy of the arrival log, sorted by arrival time.
func (m *Model) Arrivals() []Arrival {
	a := slices.Clone(m.arrivals)
	slices.SortStableFunc(a, func(x, y Arrival) int { return x.At.Compare(y.At) })
	return a
}

// Windows returns a copy of the Retry-After windows announced, in the order issued.
func (m *Model) Windows() []Window {
	return slices.Clone(m.st.windows)
}
