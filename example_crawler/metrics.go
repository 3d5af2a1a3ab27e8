package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/pacemetrics"
)

// metricsServer serves the pacer's Prometheus metrics on /metrics while the crawl runs (-metrics).
type metricsServer struct {
	m   *pacemetrics.Collector
	srv *http.Server
	ln  net.Listener
}

// addr is where the metrics are served.
func (s *metricsServer) addr() string { return s.ln.Addr().String() }

// startMetrics listens on addr ("" turns metrics off) and returns the option feeding the metrics.
func startMetrics(addr string, out io.Writer) (*metricsServer, []ext.Option, error) {
	if addr == "" {
		return nil, nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("-metrics: %w", err)
	}
	m := pacemetrics.New()
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	s := &metricsServer{m: m, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_, _ = fmt.Fprintf(out, "metrics: %v\n", err)
		}
	}()
	_, _ = fmt.Fprintf(out, "metrics: http://%s/metrics (Prometheus)\n", ln.Addr())
	return s, []ext.Option{ext.WithObserver(m)}, nil
}

// watch makes the gauges read the pacer's hosts at each scrape.
func (s *metricsServer) watch(p *ext.Pacer) {
	if s != nil {
		s.m.Watch(p)
	}
}

// close stops serving.
func (s *metricsServer) close() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
