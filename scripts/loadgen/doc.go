// Command loadgen reads one URL from N concurrent keep-alive clients for a
// fixed time and prints requests per second, for scripts/measure.sh.
//
//	loadgen -url http://127.0.0.1:9400/metrics -c 8 -d 10s [-gzip]
package main
