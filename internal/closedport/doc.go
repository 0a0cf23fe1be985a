// Package closedport gives tests a loopback address that refuses every
// connection for as long as the test runs. Listening on port 0 and closing
// the listener frees the port for the next test server to take, so a test
// running beside others can find its "dead" upstream answering; here the
// port stays bound, never listening, until the test's cleanup.
package closedport
