// Package pagetest holds what tests of several packages need to read
// exposition pages: the real fixtures and Prometheus's own view of a page.
package pagetest
