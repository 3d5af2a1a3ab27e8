package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/collypace/ext/internal/scenario"
)

// A Limiter is real rate-limiting software put in front of a scenario host: the host serves the pages
// with no limit of its own, and the limiter, a child process on 127.0.0.1, refuses what exceeds its
// rate. Arrivals are read from the limiter's own access log, never from the host behind it.
//
// nginx's limit_req without burst is a leaky bucket kept per millisecond: a request sooner than 1/Rate
// after the last accepted one is refused at once, and a refused request costs the client nothing but
// the refusal. HAProxy's stick table http_req_rate(1s) is a sliding window interpolated from two
// one-second buckets that counts every request, refused ones included: up to Rate requests in any
// second pass, and hammering a refused host keeps it refused. Below one request a second (issue 32),
// nginx takes the rate per minute (0.5/s: rate=30r/m) and HAProxy's window is the shortest whole number
// of seconds holding a whole number of requests (0.5/s: http_req_rate(2s) gt 1).
type Limiter struct {
	Kind LimiterKind
	Rate float64 // requests per second; see check for the rates each kind can express
	// Status is the refusal's status: 503 (nginx's default limit_req_status) or 429.
	Status int
	// RetryAfter is announced with every refusal, in whole seconds; zero sends none.
	RetryAfter time.Duration
}

// LimiterKind is the software of a Limiter.
type LimiterKind int

// The limiters pacebench can start. Each is a Debian package.
const (
	Nginx   LimiterKind = iota + 1 // nginx limit_req without burst (package nginx-light)
	HAProxy                        // HAProxy stick-table http_req_rate(1s) with track-sc0 (package haproxy)
)

func (k LimiterKind) String() string {
	switch k {
	case Nginx:
		return "nginx"
	case HAProxy:
		return "haproxy"
	}
	return fmt.Sprintf("LimiterKind(%d)", int(k))
}

// pkg is the Debian package that installs the kind's binary.
func (k LimiterKind) pkg() string {
	if k == Nginx {
		return "nginx-light"
	}
	return k.String()
}

// sbinDirs are searched for a limiter's binary after PATH: Debian installs both in /usr/sbin, which a
// user's PATH often lacks.
var sbinDirs = []string{"/usr/sbin", "/usr/local/sbin"}

// binary returns the path of the kind's executable, or an error saying how to install it.
func (k LimiterKind) binary() (string, error) {
	name := k.String()
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range sbinDirs {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH or %s (apt-get install %s)", name, strings.Join(sbinDirs, ", "), k.pkg())
}

// status is the refusal's status: Status, or by default nginx's 503 and HAProxy's 429.
func (l Limiter) status() int {
	switch {
	case l.Status != 0:
		return l.Status
	case l.Kind == Nginx:
		return http.StatusServiceUnavailable
	}
	return http.StatusTooManyRequests
}

// capacity describes the limiter as a scenario capacity, for measuring: its rate, its burst (1 for
// nginx without burst; for HAProxy the requests its window passes at once, Rate at 1 s), its status and
// its Retry-After. Nothing enforces it: the host behind the limiter has no capacity of its own.
func (l Limiter) capacity() *scenario.Capacity {
	burst := 1
	if l.Kind == HAProxy {
		burst, _, _ = l.haproxyWindow()
	}
	return &scenario.Capacity{Rate: l.Rate, Burst: burst, Status: l.status(), RetryAfter: l.RetryAfter}
}

// check reports a rate the kind cannot express: nginx takes whole requests per second or per minute,
// HAProxy a whole number of requests over a period of whole seconds (at most a minute).
func (l Limiter) check() error {
	var err error
	switch l.Kind {
	case Nginx:
		_, err = l.nginxRate()
	case HAProxy:
		_, _, err = l.haproxyWindow()
	default:
		err = fmt.Errorf("unknown limiter kind %v", l.Kind)
	}
	return err
}

// maxWindow bounds HAProxy's period: its stick table keeps an entry 60 s after its last request.
const maxWindow = 60

// whole reports whether x is a whole number ≥ 1, and which.
func whole(x float64) (int, bool) {
	n := math.Round(x)
	return int(n), n >= 1 && math.Abs(x-n) < 1e-9
}

// nginxRate is the rate as limit_req_zone takes it: per second when whole ("4r/s"), per minute
// otherwise ("30r/m" for 0.5/s).
func (l Limiter) nginxRate() (string, error) {
	if n, ok := whole(l.Rate); ok {
		return fmt.Sprintf("%dr/s", n), nil
	}
	if n, ok := whole(l.Rate * 60); ok {
		return fmt.Sprintf("%dr/m", n), nil
	}
	return "", fmt.Errorf("nginx limit_req cannot express %g requests/s: not a whole number a second or a minute", l.Rate)
}

// haproxyWindow is the stick table's window for the rate: the shortest period of whole seconds over
// which the rate is a whole number of requests, and that number (limit, the `gt` operand): 4 per 1 s
// for 4/s, 1 per 2 s for 0.5/s.
func (l Limiter) haproxyWindow() (limit int, period time.Duration, err error) {
	for p := 1; p <= maxWindow; p++ {
		if n, ok := whole(l.Rate * float64(p)); ok {
			return n, time.Duration(p) * time.Second, nil
		}
	}
	return 0, 0, fmt.Errorf("HAProxy's http_req_rate cannot express %g requests/s over a period of whole seconds up to %d s", l.Rate, maxWindow)
}

// describe is a short label: "nginx limit_req 4/s, 503", "HAProxy http_req_rate(2s) gt 1 (0.5/s), 429".
func (l Limiter) describe() string {
	s := fmt.Sprintf("nginx limit_req %g/s, no burst, %d", l.Rate, l.status())
	if l.Kind == HAProxy {
		limit, period, _ := l.haproxyWindow()
		s = fmt.Sprintf("HAProxy http_req_rate(1s) %g/s, %d", l.Rate, l.status())
		if period != time.Second {
			s = fmt.Sprintf("HAProxy http_req_rate(%ds) gt %d (%g/s), %d", int(period/time.Second), limit, l.Rate, l.status())
		}
	}
	if l.RetryAfter > 0 {
		s += " + Retry-After " + fmtLabel(l.RetryAfter)
	} else {
		s += " without Retry-After"
	}
	return s
}

// Bounds on a limiter process.
const (
	frontStartWait = 5 * time.Second        // for the limiter to accept connections
	frontPoll      = 20 * time.Millisecond  // how often that is checked
	frontStopWait  = 5 * time.Second        // after the graceful stop's signal, before SIGKILL
	frontDialWait  = 200 * time.Millisecond // one connection attempt
)

// front is a running limiter process in front of one scenario host, with its private directory.
type front struct {
	limiter Limiter
	dir     string // private: configuration, logs, pid and temporary files
	addr    string // 127.0.0.1:PORT the crawler connects to
	logPath string // the access log
	errPath string // the process's stderr (and nginx's error log)
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	waitErr error         // the process's exit, once exited is closed
}

// errExitedAtStart is wrapped when a limiter exits before accepting connections: most likely its port,
// free a moment before, was taken in between.
var errExitedAtStart = errors.New("exited at start")

// frontAttempts bounds the starts of one limiter, each on a newly chosen port.
const frontAttempts = 3

// startFront starts the limiter l in front of upstream ("127.0.0.1:PORT") in a new temporary directory,
// listening on a free port of 127.0.0.1, as a child process in the foreground. It returns once the
// limiter accepts connections. Close stops it and removes the directory. A limiter that exits at once
// is started again on another port, frontAttempts times at most.
func startFront(l Limiter, upstream string) (*front, error) {
	var err error
	for range frontAttempts {
		var f *front
		if f, err = startFrontOnce(l, upstream); !errors.Is(err, errExitedAtStart) {
			return f, err
		}
	}
	return nil, err
}

// startFrontOnce is one attempt of startFront.
func startFrontOnce(l Limiter, upstream string) (*front, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	bin, err := l.Kind.binary()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pacebench-"+l.Kind.String()+"-")
	if err != nil {
		return nil, err
	}
	f := &front{limiter: l, dir: dir, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), exited: make(chan struct{})}
	f.logPath = filepath.Join(dir, "access.log")
	f.errPath = filepath.Join(dir, "error.log")
	var args []string
	var conf string
	switch l.Kind {
	case Nginx:
		conf = filepath.Join(dir, "nginx.conf")
		if err := os.MkdirAll(filepath.Join(dir, nginxTempDir), 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		err = os.WriteFile(conf, []byte(nginxConfig(l, f.addr, upstream)), 0o644)
		args = []string{"-e", f.errPath, "-p", dir + "/", "-c", conf, "-g", "daemon off; master_process off;"}
	case HAProxy:
		conf = filepath.Join(dir, "haproxy.cfg")
		err = os.WriteFile(conf, []byte(haproxyConfig(l, f.addr, upstream)), 0o644)
		args = []string{"-f", conf, "-db"}
	default:
		err = fmt.Errorf("unknown limiter kind %v", l.Kind)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stderr, err := os.OpenFile(f.errPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer stderr.Close()
	f.cmd = exec.Command(bin, args...)
	f.cmd.Dir = dir
	f.cmd.Stderr = stderr
	if l.Kind == HAProxy {
		// HAProxy logs to its stdout ("log stdout format raw"): that file is its access log.
		out, err := os.Create(f.logPath)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		defer out.Close()
		f.cmd.Stdout = out
	}
	f.cmd.SysProcAttr = limiterProcAttr()
	if err := f.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: %w", l.Kind, err)
	}
	go func() {
		f.waitErr = f.cmd.Wait()
		close(f.exited)
	}()
	if err := f.waitReady(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// waitReady waits until the limiter accepts a connection, at most frontStartWait; an exit before that
// is an error carrying the process's messages.
func (f *front) waitReady() error {
	deadline := time.Now().Add(frontStartWait)
	for time.Now().Before(deadline) {
		select {
		case <-f.exited:
			return fmt.Errorf("%s on %s %w (%v): %s", f.limiter.Kind, f.addr, errExitedAtStart, f.waitErr, f.messages())
		default:
		}
		if c, err := net.DialTimeout("tcp", f.addr, frontDialWait); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(frontPoll)
	}
	return fmt.Errorf("%s did not accept connections on %s within %v: %s", f.limiter.Kind, f.addr, frontStartWait, f.messages())
}

// messages returns the end of the process's error output, for an error.
func (f *front) messages() string {
	b, _ := os.ReadFile(f.errPath)
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}

// URL returns the base URL the crawler uses, "http://127.0.0.1:PORT".
func (f *front) URL() string { return "http://" + f.addr }

// stop ends the process gracefully (nginx: SIGQUIT, HAProxy: SIGUSR1), so that the last requests'
// lines reach the access log (each is written as its request ends, which can be just after the client
// read the response: a SIGTERM then lost HAProxy's line of the crawl's last page), then SIGKILL after
// frontStopWait. It is idempotent.
func (f *front) stop() {
	select {
	case <-f.exited:
		return
	default:
	}
	graceful := syscall.SIGQUIT
	if f.limiter.Kind == HAProxy {
		graceful = syscall.SIGUSR1
	}
	_ = f.cmd.Process.Signal(graceful)
	select {
	case <-f.exited:
	case <-time.After(frontStopWait):
		_ = f.cmd.Process.Kill()
		<-f.exited
	}
}

// Close stops the process and removes its directory. It is idempotent.
func (f *front) Close() {
	f.stop()
	os.RemoveAll(f.dir)
}

// Log stops the process and parses its access log: the arrivals, sorted by time, and a Retry-After
// window for each refusal that announced one.
func (f *front) Log() ([]scenario.Arrival, []scenario.Window, error) {
	f.stop()
	file, err := os.Open(f.logPath)
	if err != nil {
		return nil, nil, fmt.Errorf("%s access log: %w", f.limiter.Kind, err)
	}
	defer file.Close()
	var arr []scenario.Arrival
	var ws []scenario.Window
	switch f.limiter.Kind {
	case Nginx:
		arr, ws, err = parseNginxLog(file)
	case HAProxy:
		arr, ws, err = parseHAProxyLog(file, f.limiter)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s access log %s: %w", f.limiter.Kind, f.logPath, err)
	}
	return arr, ws, nil
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// nginxLogFormat is the access log's format: the instant the log line was written ($msec, when the
// response was sent), the request's time ($request_time: from its first byte to the log), both in
// milliseconds, then the status, the path, the client's send stamp and the Retry-After sent.
const nginxLogFormat = `$msec $request_time $status "$uri" "$http_x_scenario_sent" "$sent_http_retry_after"`

// nginxTempDir is the directory, under the prefix, of nginx's temporary files; it must exist.
const nginxTempDir = "tmp"

// nginxConfig is a private nginx configuration: limit_req without burst at l.Rate (l.nginxRate; the
// rate must pass l.check) on every page,
// refusing with l.Status and, with a RetryAfter, a Retry-After header on refusals only (a map on the
// status, since add_header … always would add it to every response). robots.txt is exempt, as on
// every scenario host. limit_req runs in the preaccess phase, so the pages must come from a content
// handler (the proxy), not from `return`, which the rewrite phase answers before any limit.
func nginxConfig(l Limiter, listen, upstream string) string {
	status := l.status()
	retryAfter := `""`
	if l.RetryAfter > 0 {
		retryAfter = strconv.FormatInt(ceilSeconds(l.RetryAfter), 10)
	}
	rate, _ := l.nginxRate()
	return fmt.Sprintf(`# pacebench: nginx limit_req without burst, %[7]g/s, in front of a scenario host.
error_log error.log notice;
pid nginx.pid;
worker_processes 1;
events { worker_connections 512; }
http {
  client_body_temp_path tmp/client;
  proxy_temp_path tmp/proxy;
  fastcgi_temp_path tmp/fastcgi;
  uwsgi_temp_path tmp/uwsgi;
  scgi_temp_path tmp/scgi;
  log_format pace '%[2]s';
  access_log off;
  limit_req_zone $binary_remote_addr zone=pace:1m rate=%[1]s;
  limit_req_status %[3]d;
  limit_req_log_level info;
  map $status $pace_retry_after { %[3]d %[4]s; default ""; }
  server {
    listen %[5]s;
    access_log access.log pace;
    location = /robots.txt { proxy_pass http://%[6]s; }
    location / {
      limit_req zone=pace;
      add_header Retry-After $pace_retry_after always;
      proxy_pass http://%[6]s;
    }
  }
}
`, rate, nginxLogFormat, status, retryAfter, listen, upstream, l.Rate)
}

// haproxyLogFormat logs, for each request: the accept date as Unix seconds and milliseconds, the
// handshake and idle times (a request on a kept-alive connection was received accept + %Th + %Ti), the
// active time to the end of the response (%Ta), all in milliseconds, then the status, the path and the
// client's send stamp (captured header 0). Each of the three is truncated to the millisecond, so an
// arrival can read up to 2 ms early.
const haproxyLogFormat = `%Ts %ms %Th %Ti %Ta %ST %HP {%[capture.req.hdr(0)]}`

// haproxyConfig is a private HAProxy configuration: a stick table of http_req_rate(1s) tracking each
// client (track-sc0 src) and answering l.Status, with l.RetryAfter, once the rate over the last second
// exceeds l.Rate (below 1/s, over l.haproxyWindow's period: http_req_rate(2s) gt 1 for 0.5/s; the rate
// must pass l.check). Every request is counted, refused ones included. robots.txt is neither tracked nor
// refused. It logs to its stdout, which pacebench writes to the access log; a connection that sends
// nothing (startFront's readiness probe) is not logged.
func haproxyConfig(l Limiter, listen, upstream string) string {
	status := l.status()
	hdr := ""
	if l.RetryAfter > 0 {
		hdr = fmt.Sprintf(" hdr Retry-After %d", ceilSeconds(l.RetryAfter))
	}
	limit, period, _ := l.haproxyWindow()
	return fmt.Sprintf(`# pacebench: HAProxy http_req_rate(%[8]ds), %[7]g/s, in front of a scenario host.
global
  log stdout format raw local0
  maxconn 512
defaults
  mode http
  log global
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  timeout http-keep-alive 60s
  option dontlognull
frontend pace
  bind %[2]s
  log-format "%[3]s"
  http-request capture req.hdr(X-Scenario-Sent) len 24
  stick-table type ip size 1k expire 60s store http_req_rate(%[8]ds)
  http-request track-sc0 src unless { path /robots.txt }
  http-request return status %[4]d%[5]s if { sc_http_req_rate(0) gt %[1]d }
  default_backend pages
backend pages
  server host %[6]s
`, limit, listen, haproxyLogFormat, status, hdr, upstream, l.Rate, int(period/time.Second))
}

// ceilSeconds is d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// errLogLine is wrapped by every malformed access log line.
var errLogLine = errors.New("malformed log line")

// maxLogLines bounds the lines read from one access log (a 10-minute crawl at 10/s writes 6000).
const maxLogLines = 1_000_000

// parseNginxLog reads an access log of nginxLogFormat. A request arrived $request_time before its line
// was written ($msec), which is when it was answered; a Retry-After in delay-seconds opens a window
// from its arrival.
func parseNginxLog(r io.Reader) ([]scenario.Arrival, []scenario.Window, error) {
	var arr []scenario.Arrival
	var ws []scenario.Window
	err := eachLine(r, func(n int, line string) error {
		head, quoted, ok := strings.Cut(line, ` "`)
		f := strings.Fields(head)
		q := strings.Split(`"`+quoted, `" "`) // "uri", "sent", "retry-after"
		if !ok || len(f) != 3 || len(q) != 3 {
			return fmt.Errorf("line %d: %w: %q", n, errLogLine, line)
		}
		msec, err1 := parseMillis(f[0])
		took, err2 := parseMillis(f[1])
		status, err3 := strconv.Atoi(f[2])
		if err := errors.Join(err1, err2, err3); err != nil {
			return fmt.Errorf("line %d: %w: %q: %v", n, errLogLine, line, err)
		}
		answered := time.UnixMilli(msec)
		a := scenario.Arrival{
			At: answered.Add(-time.Duration(took) * time.Millisecond), Path: strings.TrimPrefix(q[0], `"`),
			Status: status, Sent: sentStampOf(q[1]),
		}
		arr = append(arr, a)
		if ra := strings.TrimSuffix(q[2], `"`); ra != "-" && ra != "" {
			secs, err := strconv.Atoi(ra)
			if err != nil || secs < 0 {
				return fmt.Errorf("line %d: %w: Retry-After %q", n, errLogLine, ra)
			}
			ws = append(ws, window(a, answered, time.Duration(secs)*time.Second))
		}
		return nil
	})
	return sortArrivals(arr), ws, err
}

// parseHAProxyLog reads an access log of haproxyLogFormat. A request arrived at its accept date plus
// its handshake and idle times, and was answered its active time later. HAProxy cannot log a header of
// a response it generated (http-request return), so a refusal's window is the configured Retry-After.
func parseHAProxyLog(r io.Reader, l Limiter) ([]scenario.Arrival, []scenario.Window, error) {
	var arr []scenario.Arrival
	var ws []scenario.Window
	err := eachLine(r, func(n int, line string) error {
		if strings.HasPrefix(line, "Proxy ") || strings.HasPrefix(line, "[") {
			return nil // HAProxy's own notices on its stdout ("Proxy pace stopped (…)." at a soft stop)
		}
		f := strings.Fields(line)
		if len(f) != 8 || !strings.HasPrefix(f[7], "{") || !strings.HasSuffix(f[7], "}") {
			return fmt.Errorf("line %d: %w: %q", n, errLogLine, line)
		}
		var v [6]int64
		for i := range v {
			x, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil || (x < 0 && i != 4) { // %Ta is -1 when the response was never sent
				return fmt.Errorf("line %d: %w: field %d of %q", n, errLogLine, i+1, line)
			}
			v[i] = x
		}
		accepted := time.Unix(v[0], v[1]*int64(time.Millisecond))
		at := accepted.Add(time.Duration(v[2]+v[3]) * time.Millisecond)
		a := scenario.Arrival{At: at, Path: f[6], Status: int(v[5]), Sent: sentStampOf(strings.Trim(f[7], "{}"))}
		arr = append(arr, a)
		if a.Status == l.status() && l.RetryAfter > 0 && v[4] >= 0 {
			ws = append(ws, window(a, at.Add(time.Duration(v[4])*time.Millisecond), time.Duration(ceilSeconds(l.RetryAfter))*time.Second))
		}
		return nil
	})
	return sortArrivals(arr), ws, err
}

// window is the Retry-After window a refusal announced: from its arrival (the limiter decides at once)
// for wait, answered at answered.
func window(a scenario.Arrival, answered time.Time, wait time.Duration) scenario.Window {
	return scenario.Window{Issued: a.At, Answered: answered, Until: a.At.Add(wait), Path: a.Path, Status: a.Status}
}

// eachLine calls fn with each non-empty line of r (numbered from 1), at most maxLogLines.
func eachLine(r io.Reader, fn func(n int, line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	n := 0
	for sc.Scan() {
		n++
		if n > maxLogLines {
			return fmt.Errorf("more than %d lines", maxLogLines)
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	return sc.Err()
}

// parseMillis parses "1796357612.692" (seconds with up to three decimals) as Unix milliseconds.
func parseMillis(s string) (int64, error) {
	secs, frac, _ := strings.Cut(s, ".")
	if len(frac) > 3 {
		return 0, fmt.Errorf("%q: more than millisecond resolution", s)
	}
	frac += strings.Repeat("0", 3-len(frac))
	whole, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || whole < 0 {
		return 0, fmt.Errorf("%q: not seconds", s)
	}
	ms, err := strconv.ParseInt(frac, 10, 64)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("%q: not milliseconds", s)
	}
	return whole*1000 + ms, nil
}

// sentStampOf parses a logged scenario.SentHeader (Unix nanoseconds); zero for "-", empty or malformed.
func sentStampOf(s string) time.Time {
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ns <= 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// sortArrivals sorts arrivals by time, stably (the log is in order of completion, not of arrival).
func sortArrivals(a []scenario.Arrival) []scenario.Arrival {
	slices.SortStableFunc(a, func(x, y scenario.Arrival) int { return x.At.Compare(y.At) })
	return a
}
