// Command staticupstream stands in for vLLM in scripts/measure.sh: it
// serves one exposition page on loopback, gzip-compressed when the client
// asks (as vLLM's prometheus_client does), and counts the requests it
// answered at /count.
//
//	staticupstream -page FILE -addr-file PATH
//	staticupstream -demo-engines 16 -addr-file PATH
//
// With -page the bytes never change; with -demo-engines the page is the
// demo upstream's, values moving with the wall clock.
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/exposition"
)

func main() {
	page := flag.String("page", "", "file whose bytes are served at /metrics")
	engines := flag.Int("demo-engines", 0, "serve the demo upstream with this many engines instead of -page")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	addrFile := flag.String("addr-file", "", "write the address actually listened on to this file")
	dump := flag.String("dump", "", "with -demo-engines: write one demo page to this file and exit")
	flag.Parse()

	var served atomic.Int64
	var h http.Handler
	switch {
	case *engines > 0:
		up, err := demo.New(demo.Options{Engines: *engines, Seed: 1})
		if err != nil {
			log.Fatal(err)
		}
		if *dump != "" {
			if err := os.WriteFile(*dump, up.Page(), 0o644); err != nil {
				log.Fatal(err)
			}
			return
		}
		h = up
	case *page != "":
		body, err := os.ReadFile(*page)
		if err != nil {
			log.Fatal(err)
		}
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		_, _ = zw.Write(body)
		_ = zw.Close()
		gz := zb.Bytes()
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", exposition.ContentTypeText)
			b := body
			if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				w.Header().Set("Content-Encoding", "gzip")
				b = gz
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			_, _ = w.Write(b)
		})
	default:
		log.Fatal("give -page FILE or -demo-engines N")
	}

	mux := http.NewServeMux()
	mux.Handle("/metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		h.ServeHTTP(w, r)
	}))
	mux.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, served.Load())
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	log.Fatal(http.Serve(ln, mux))
}
