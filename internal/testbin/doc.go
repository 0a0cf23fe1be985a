// Package testbin builds and runs the real vllm-normalizer binary for
// end-to-end tests, the way a user runs it.
package testbin
