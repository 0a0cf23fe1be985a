package main

import (
	"fmt"
	"os"

	"github.com/fos-study/vllm-normalizer/mapping"
)

// mapperLoader builds a Mapper from the flags and the config file. Every
// load parses into a new value; the collector swaps it in only on success,
// so a bad file never replaces a good configuration.
type mapperLoader struct {
	path      string
	catalogue *mapping.Catalogue
	opts      mapping.Options
}

func (l *mapperLoader) load() (*mapping.Mapper, error) {
	opts := l.opts
	if l.path != "" {
		b, err := os.ReadFile(l.path)
		if err != nil {
			return nil, fmt.Errorf("--config.file: %w", err)
		}
		cfg, err := mapping.LoadConfig(b)
		if err != nil {
			return nil, fmt.Errorf("--config.file %s: %w", l.path, err)
		}
		opts.Config = cfg
	}
	return mapping.New(l.catalogue, opts)
}
