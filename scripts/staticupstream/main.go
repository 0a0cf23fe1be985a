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
	"sync"
	"sync/atomic"
	"time"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/exposition"
)

func main() {
	page := flag.String("page", "", "file whose bytes are served at /metrics")
	engines := flag.Int("demo-engines", 0, "serve the demo upstream with this many engines instead of -page")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	addrFile := flag.String("addr-file", "", "write the address actually listened on to this file")
	dump := flag.String("dump", "", "with -demo-engines: write one demo page to this file and exit")
	refresh := flag.Duration("demo-refresh", 0, "with -demo-engines: render a new page at most once per this period (0: on every request)")
	flag.Parse()

	var served atomic.Int64
	var mu sync.Mutex
	perWho := map[string]int64{}
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
		if *refresh <= 0 {
			h = up
			break
		}
		var (
			pmu      sync.Mutex
			at       time.Time
			body, gz []byte
		)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pmu.Lock()
			if time.Since(at) >= *refresh {
				body = up.Page()
				gz = gzipped(body)
				at = time.Now()
			}
			b, z := body, gz
			pmu.Unlock()
			servePage(w, r, b, z)
		})
	case *page != "":
		body, err := os.ReadFile(*page)
		if err != nil {
			log.Fatal(err)
		}
		gz := gzipped(body)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { servePage(w, r, body, gz) })
	default:
		log.Fatal("give -page FILE or -demo-engines N")
	}

	mux := http.NewServeMux()
	mux.Handle("/metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if who := r.URL.Query().Get("who"); who != "" {
			mu.Lock()
			perWho[who]++
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	mux.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) {
		if who := r.URL.Query().Get("who"); who != "" {
			mu.Lock()
			n := perWho[who]
			mu.Unlock()
			fmt.Fprintln(w, n)
			return
		}
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

func gzipped(body []byte) []byte {
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write(body)
	_ = zw.Close()
	return zb.Bytes()
}

// servePage writes body, or gz when the client accepts gzip, as vLLM does.
func servePage(w http.ResponseWriter, r *http.Request, body, gz []byte) {
	w.Header().Set("Content-Type", exposition.ContentTypeText)
	b := body
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		b = gz
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}
