// Command floor is the least any faithful re-exposer of a vLLM page must
// do, the yardstick scripts/sidebyside.sh holds the sidecar against: once
// per interval it fetches the page (asking for text format, and for gzip
// only with -gzip, as the sidecar does by default), walks it with
// Prometheus's textparse,
// labels of every series included, and serves the raw bytes it read on
// /metrics. It keeps no history, renames nothing and derives nothing.
// With -views it also serves fixed gzip bytes (a sidecar's views, saved
// by scripts/sidebyside.sh -v) the way the sidecar serves its views: what
// serving the same bytes costs with nothing to encode or compress.
//
//	floor -url http://127.0.0.1:8000/metrics -interval 1s -addr-file PATH
package main
