// Package collector runs the scrape loop and owns its time: fetch vLLM's
// page (scrape), parse it (exposition), normalise it (mapping), keep the
// windows derived gauges need (window), derive them (derive), build the
// routing view (routing), and prepare the bytes that /metrics and
// /metrics/routing serve (serve). It also keeps the sidecar's own metrics.
//
// Data flows one way, once per scrape interval, off the request path:
// scrape → parse → normalise → window → derive → encode. Handlers only pick
// up the last prepared snapshot, so a router reading many times a second
// costs a copy of bytes, never a parse.
package collector
