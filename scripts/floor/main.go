package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

type page struct {
	body        []byte
	contentType string
	length      string
}

func main() {
	url := flag.String("url", "", "page to scrape")
	interval := flag.Duration("interval", time.Second, "time between scrape starts")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	addrFile := flag.String("addr-file", "", "write the address actually listened on to this file")
	maxBody := flag.Int64("max-body-bytes", 64<<20, "largest page read, after decompression")
	askGzip := flag.Bool("gzip", false, "ask for a gzip page (Go's transport decompresses it), as the sidecar does with --vllm.enable-compression")
	views := flag.String("views", "", "also serve, gzipped from memory as the sidecar serves its views, DIR/routing.gz and DIR/genai.gz on /metrics/routing and /metrics/genai, and DIR/compat.gz on /metrics of a second listener")
	viewsAddrFile := flag.String("views-addr-file", "", "with -views, write the second listener's address to this file")
	flag.Parse()
	if *url == "" {
		log.Fatal("-url is required")
	}

	var cur atomic.Pointer[page]
	cur.Store(&page{contentType: "text/plain; version=0.0.4; charset=utf-8", length: "0"})
	var scrapes, failures atomic.Int64
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConns: 2, DisableCompression: !*askGzip}}
	st := labels.NewSymbolTable()
	var lset labels.Labels
	hint := 64 << 10

	scrape := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), *interval*9/10)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Accept", "text/plain;version=0.0.4")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		// A fresh buffer each time: the last page may still be being served.
		buf := bytes.NewBuffer(make([]byte, 0, hint))
		if _, err := buf.ReadFrom(io.LimitReader(resp.Body, *maxBody+1)); err != nil {
			return err
		}
		if int64(buf.Len()) > *maxBody {
			return errors.New("page larger than -max-body-bytes")
		}
		body := buf.Bytes()
		hint = len(body) + 4096
		ct := resp.Header.Get("Content-Type")
		p, err := textparse.New(body, ct, st, textparse.ParserOptions{FallbackContentType: "text/plain"})
		if p == nil {
			return err
		}
		for {
			e, err := p.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if e == textparse.EntrySeries {
				p.Series()
				p.Labels(&lset)
			}
		}
		cur.Store(&page{body: body, contentType: ct, length: strconv.Itoa(len(body))})
		return nil
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		p := cur.Load()
		w.Header().Set("Content-Type", p.contentType)
		w.Header().Set("Content-Length", p.length)
		_, _ = w.Write(p.body)
	})
	mux.HandleFunc("/count", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%d %d\n", scrapes.Load(), failures.Load())
	})
	if *views != "" {
		mux.Handle("/metrics/routing", gzipFile(*views+"/routing.gz"))
		mux.Handle("/metrics/genai", gzipFile(*views+"/genai.gz"))
		compat := http.NewServeMux()
		compat.Handle("/metrics", gzipFile(*views+"/compat.gz"))
		vln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(*viewsAddrFile, []byte(vln.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
		go func() { log.Fatal(http.Serve(vln, compat)) }()
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	go func() {
		t := time.NewTicker(*interval)
		defer t.Stop()
		for ; ; <-t.C {
			if err := scrape(); err != nil {
				failures.Add(1)
				log.Print(err)
			}
			scrapes.Add(1)
		}
	}()
	log.Fatal(http.Serve(ln, mux))
}

// gzipFile serves the gzip bytes of path, read once, with the headers the
// sidecar sends with a gzip view.
func gzipFile(path string) http.Handler {
	body, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	length := strconv.Itoa(len(body))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		h.Set("Vary", "Accept-Encoding")
		h.Set("Content-Encoding", "gzip")
		h.Set("Content-Length", length)
		_, _ = w.Write(body)
	})
}
