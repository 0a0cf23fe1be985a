// Command staticupstream stands in for vLLM in scripts/measure.sh: it
// serves one exposition page on loopback, gzip-compressed when the client
// asks (as vLLM's prometheus_client does), and counts the requests it
// answered at /count. Requests for /metrics?who=NAME are also counted
// per NAME, at /count?who=NAME, so that several scrapers of one upstream
// (scripts/sidebyside.sh) each know how many scrapes they made.
//
//	staticupstream -page FILE -addr-file PATH
//	staticupstream -demo-engines 16 [-demo-refresh 1s] -addr-file PATH
//
// With -page the bytes never change; with -demo-engines the page is the
// demo upstream's, values moving with the wall clock, rendered anew on
// every request or, with -demo-refresh, at most once per that period (a
// 2.5 MB page rendered and gzipped for every request would cost this
// process more CPU than the scrapers being measured).
package main
