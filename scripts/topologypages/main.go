package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"

	"github.com/fos-study/vllm-normalizer/scripts/topologypages/scenario"
)

func main() {
	dir := flag.String("dir", "testdata/fixtures", "where to write the pages")
	flag.Parse()
	for name, page := range pages() {
		p := filepath.Join(*dir, name)
		if err := os.WriteFile(p, []byte(page), 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("wrote %s (%d bytes)\n", p, len(page))
	}
}

// pages returns every constructed page by file name.
func pages() map[string]string {
	out := map[string]string{}
	for _, p := range slices.Concat(scenario.PrefillDecode, []scenario.Pod{scenario.DataParallel}, scenario.Admission) {
		for _, t := range scenario.Times {
			out[scenario.FileName(p, t)] = scenario.Page(p, t)
		}
	}
	return out
}
