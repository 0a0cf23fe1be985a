// Package pagetest holds what tests of several packages need to read
// exposition pages: the real fixtures, Prometheus's own view of a page,
// and an upstream that serves one behind redirects.
package pagetest
