package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "", "URL to read")
	conc := flag.Int("c", 8, "concurrent clients, each with its own keep-alive connection")
	dur := flag.Duration("d", 10*time.Second, "how long to read")
	gz := flag.Bool("gzip", false, "ask for gzip (Accept-Encoding: gzip), as Prometheus and Go clients do")
	flag.Parse()
	if *url == "" {
		log.Fatal("-url is required")
	}
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: *conc,
		DisableCompression:  true, // count the bytes on the wire; never decompress
	}}
	var reqs, bytes, errs atomic.Int64
	deadline := time.Now().Add(*dur)
	var wg sync.WaitGroup
	start := time.Now()
	for range *conc {
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			req, _ := http.NewRequest(http.MethodGet, *url, nil)
			if *gz {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			for time.Now().Before(deadline) {
				resp, err := client.Do(req)
				if err != nil {
					errs.Add(1)
					continue
				}
				n, _ := io.CopyBuffer(io.Discard, resp.Body, buf)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs.Add(1)
					continue
				}
				reqs.Add(1)
				bytes.Add(n)
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	fmt.Printf("requests=%d errors=%d seconds=%.2f req_per_s=%.0f MB_per_s=%.1f bytes_per_req=%d\n",
		reqs.Load(), errs.Load(), secs, float64(reqs.Load())/secs, float64(bytes.Load())/secs/1e6, bytes.Load()/max(reqs.Load(), 1))
}
