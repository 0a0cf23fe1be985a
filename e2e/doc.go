// Package e2e holds end-to-end tests of the vllm-normalizer binary: the real
// command, built once by internal/testbin, scraping misbehaving upstreams on
// loopback (fault matrix), surviving upstream restarts, serving many readers
// at once, behind TLS and basic auth, and stopping and reloading cleanly.
//
// The package has no code besides its tests. Run it with
//
//	go test -race ./e2e
//
// E2E_LOAD_SECONDS lengthens the load test (default 10 s).
package e2e
