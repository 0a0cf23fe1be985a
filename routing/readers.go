package routing

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v2"
)

// Readers is the table of which names each router reads of each kind of
// server (readers.yaml): the routing view serves them beside vLLM's names.
type Readers struct {
	Version   int             `yaml:"version"`
	Consumers []ConsumerReads `yaml:"consumers"`
}

// ConsumerReads is one consumer's table.
type ConsumerReads struct {
	Consumer    string                 `yaml:"consumer"`
	What        string                 `yaml:"what"`
	EngineLabel string                 `yaml:"engine_label"`
	Engines     map[string]EngineReads `yaml:"engines"`
}

// EngineReads is what one consumer reads of one engine (a value of its
// engine label).
type EngineReads struct {
	Server         string     `yaml:"server"`
	Waiting        string     `yaml:"waiting"`
	Running        string     `yaml:"running"`
	KVUsage        string     `yaml:"kv_usage"`
	CacheInfo      *CacheInfo `yaml:"cache_info"`
	CacheBlockSize string     `yaml:"cache_block_size"`
	CacheNumBlocks string     `yaml:"cache_num_blocks"`
	// Families are further native families the consumer reads, served on
	// the compatibility page under their own names.
	Families []string `yaml:"families"`
	Path     string   `yaml:"path"`
}

// CacheInfo is an info family carrying block size and block count as labels.
type CacheInfo struct {
	Family         string `yaml:"family"`
	BlockSizeLabel string `yaml:"block_size_label"`
	NumBlocksLabel string `yaml:"num_blocks_label"`
}

//go:embed readers.yaml
var readersYAML []byte

// LoadReaders parses the built-in table.
func LoadReaders() (*Readers, error) { return ParseReaders(readersYAML) }

// ParseReaders parses a table in readers.yaml's form and checks it.
func ParseReaders(b []byte) (*Readers, error) {
	var r Readers
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		return nil, fmt.Errorf("routing readers table: %w", err)
	}
	if r.Version != 1 {
		return nil, fmt.Errorf("routing readers table: version %d, want 1", r.Version)
	}
	for _, c := range r.Consumers {
		for e, er := range c.Engines {
			if er.Server == "" {
				return nil, fmt.Errorf("routing readers table: consumer %s, engine %s has no server; name the profile server (vllm, sglang, trtllm, llamacpp)", c.Consumer, e)
			}
			if (er.CacheBlockSize == "") != (er.CacheNumBlocks == "") {
				return nil, fmt.Errorf("routing readers table: consumer %s, engine %s gives only one of cache_block_size and cache_num_blocks; a router needs both", c.Consumer, e)
			}
			if ci := er.CacheInfo; ci != nil && (ci.Family == "" || ci.BlockSizeLabel == "" || ci.NumBlocksLabel == "") {
				return nil, fmt.Errorf("routing readers table: consumer %s, engine %s: cache_info needs family, block_size_label and num_blocks_label", c.Consumer, e)
			}
			if er.Path != "" && !strings.HasPrefix(er.Path, "/") {
				return nil, fmt.Errorf("routing readers table: consumer %s, engine %s: path %q must start with /", c.Consumer, e, er.Path)
			}
		}
	}
	return &r, nil
}

// Natives are the names every consumer of the table reads of one server,
// each once, sorted.
type Natives struct {
	Waiting, Running, KVUsage []string
	CacheInfo                 []CacheInfo
	CacheGauges               [][2]string // block size, block count
	// Families: the other native families consumers read, for the
	// compatibility page.
	Families []string
}

// For returns the names the table's consumers read of server.
func (r *Readers) For(server string) Natives {
	var n Natives
	if r == nil || server == "" {
		return n
	}
	add := func(list *[]string, name string) {
		if name != "" && !slices.Contains(*list, name) {
			*list = append(*list, name)
		}
	}
	for _, c := range r.Consumers {
		for _, e := range c.Engines {
			if e.Server != server {
				continue
			}
			add(&n.Waiting, e.Waiting)
			add(&n.Running, e.Running)
			add(&n.KVUsage, e.KVUsage)
			if e.CacheInfo != nil && !slices.Contains(n.CacheInfo, *e.CacheInfo) {
				n.CacheInfo = append(n.CacheInfo, *e.CacheInfo)
			}
			if g := [2]string{e.CacheBlockSize, e.CacheNumBlocks}; g[0] != "" && !slices.Contains(n.CacheGauges, g) {
				n.CacheGauges = append(n.CacheGauges, g)
			}
			for _, f := range e.Families {
				add(&n.Families, f)
			}
		}
	}
	slices.Sort(n.Waiting)
	slices.Sort(n.Running)
	slices.Sort(n.KVUsage)
	slices.Sort(n.Families)
	return n
}

// Paths returns the paths other than /metrics that consumers of the table
// ask of a router-facing listener, sorted.
func (r *Readers) Paths() []string {
	var out []string
	for _, c := range r.Consumers {
		for _, e := range c.Engines {
			if e.Path != "" && e.Path != "/metrics" && !slices.Contains(out, e.Path) {
				out = append(out, e.Path)
			}
		}
	}
	slices.Sort(out)
	return out
}
