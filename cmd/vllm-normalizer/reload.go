package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/fos-study/vllm-normalizer/mapping"
)

// mapperLoader builds a Mapper from the flags, the config file and the
// operator's engine profile files. Every load reads and parses into a new
// value; the collector swaps it in only on success, so a bad file never
// replaces a good configuration.
type mapperLoader struct {
	path         string
	profileFiles []string
	catalogue    *mapping.Catalogue
	opts         mapping.Options
}

func (l *mapperLoader) load() (*mapping.Mapper, error) {
	opts := l.opts
	if l.path != "" {
		b, err := os.ReadFile(l.path)
		if err != nil {
			return nil, fmt.Errorf("--config.file: %w; give a readable YAML file of metric_relabel_configs, or leave the flag out", err)
		}
		cfg, err := mapping.LoadConfig(b)
		if err != nil {
			return nil, fmt.Errorf("--config.file %s: %w", l.path, err)
		}
		opts.Config = cfg
	}
	profiles, err := l.profiles()
	if err != nil {
		return nil, err
	}
	opts.Profiles = profiles
	return mapping.New(l.catalogue, opts)
}

// profiles are the built-in engine profiles with --engine.profile-file's
// added or replacing theirs.
func (l *mapperLoader) profiles() (*mapping.Profiles, error) {
	builtIn, err := mapping.LoadProfiles(l.catalogue.Roles())
	if err != nil {
		return nil, fmt.Errorf("the built-in engine profiles are invalid: %w", err)
	}
	srcs := make([]mapping.ProfileSource, 0, len(l.profileFiles))
	for _, p := range l.profileFiles {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("--engine.profile-file: %w; give a readable engine profile (YAML; docs/operating.md#engine-profile-files), or leave the flag out", err)
		}
		srcs = append(srcs, mapping.ProfileSource{Name: p, Data: b})
	}
	ps, err := builtIn.With(srcs)
	if err != nil {
		return nil, fmt.Errorf("--engine.profile-file: %w", err)
	}
	return ps, nil
}

// describe names what a load reads, for --config.check and reload logs.
func (l *mapperLoader) describe() string {
	s := orDefault(l.path, "the built-in mapping")
	if len(l.profileFiles) > 0 {
		s += " with engine profiles " + strings.Join(l.profileFiles, ", ")
	}
	return s
}
