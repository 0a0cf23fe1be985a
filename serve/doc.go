// Package serve holds pages encoded once and hands them to HTTP clients:
// content negotiation (text 0.0.4 or OpenMetrics, gzip or not) without
// re-encoding per request.
package serve
