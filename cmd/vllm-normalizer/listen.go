package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/mdlayher/vsock"
	"github.com/prometheus/exporter-toolkit/web"
)

// listeners opens what exporter-toolkit's ListenAndServe would (every
// address of flag, tcp or vsock://, or the systemd-activated sockets)
// and bounds each to maxConns simultaneous connections, so that slow or
// idle clients cannot pile up goroutines and pinned pages without limit;
// at the cap the longest-idle connection makes room (see connLimiter).
func listeners(flag string, f *web.FlagConfig, maxConns int, logger *slog.Logger) ([]net.Listener, error) {
	var out []net.Listener
	if f.WebSystemdSocket != nil && *f.WebSystemdSocket {
		logger.Info("Listening on systemd activated listeners instead of port listeners.")
		ls, err := activation.Listeners()
		if err != nil {
			return nil, err
		}
		if len(ls) == 0 {
			return nil, errors.New("--web.systemd-socket: no socket activation file descriptors found")
		}
		out = ls
	} else {
		if f.WebListenAddresses == nil || len(*f.WebListenAddresses) == 0 {
			return nil, fmt.Errorf("no %s given", flag)
		}
		for _, addr := range *f.WebListenAddresses {
			l, err := listen(addr)
			if err != nil {
				closeAll(out)
				return nil, listenFailed(flag, addr, err)
			}
			out = append(out, l)
		}
	}
	if maxConns > 0 {
		for i, l := range out {
			out[i] = newConnLimiter(maxConns).Listener(l)
		}
	}
	return out, nil
}

func listen(addr string) (net.Listener, error) {
	if !strings.HasPrefix(addr, "vsock://") {
		return net.Listen("tcp", addr)
	}
	port, err := vsockPort(addr)
	if err != nil {
		return nil, err
	}
	return vsock.Listen(port, nil)
}

// vsockPort is the port of a vsock://[CID]:PORT listen address.
func vsockPort(addr string) (uint32, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return 0, err
	}
	_, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		return 0, err
	}
	port, err := strconv.ParseUint(p, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("vsock port %q: %w", p, err)
	}
	return uint32(port), nil
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		_ = l.Close()
	}
}

// serve runs server on the listeners with exporter-toolkit (TLS and basic
// auth from --web.config.file) until it is shut down.
func serve(ls []net.Listener, server *http.Server, f *web.FlagConfig, logger *slog.Logger) error {
	defer closeAll(ls)
	return web.ServeMultiple(ls, server, f, logger)
}
