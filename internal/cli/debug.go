package cli

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// debugServer serves the Go runtime's profiles (net/http/pprof) for
// --debug-addr, on a listener of its own: never on the API's address, and
// without authentication.
type debugServer struct {
	srv *http.Server
	url string
}

// listenDebug binds addr and starts serving /debug/pprof/ there. The
// handlers are on a mux of their own, not http.DefaultServeMux.
func listenDebug(addr string, logger *slog.Logger) (*debugServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		logger.Warn("--debug-addr is not a loopback address: anyone who reaches it can read the server's memory profiles and stacks, without an API key", "addr", ln.Addr().String())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	d := &debugServer{
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)},
		url: "http://" + ln.Addr().String() + "/debug/pprof/",
	}
	go func() {
		if err := d.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("debug listener", "err", err)
		}
	}()
	return d, nil
}

// close stops the listener and cuts the requests in flight: a CPU profile
// being taken does not hold up the server's shutdown.
func (d *debugServer) close() {
	if d != nil {
		d.srv.Close()
	}
}
