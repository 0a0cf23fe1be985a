// Package scrape fetches the upstream page: one fixed URL, bounded in size and
// time, with every failure classified under the reason it is counted as.
package scrape
