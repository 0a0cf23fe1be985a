// Package proxy stands in for vLLM's inference port, for consumers that read
// metrics from the same host and port they send inference to (vLLM
// production-stack's router, kthena). GET and HEAD /metrics are answered by
// a handler of the caller's choosing (the routing view); every other request
// goes to vLLM unchanged through net/http/httputil.ReverseProxy.
//
// What the proxy promises, and how:
//
//   - Streams are not buffered: every write of the upstream is flushed to the
//     client at once (FlushInterval -1), so server-sent events arrive token by
//     token.
//   - A client that goes away cancels the upstream request (the outgoing
//     request carries the incoming request's context), so vLLM aborts the
//     generation instead of computing it for nobody.
//   - No time limit can cut a generation: the only bounds are on connecting
//     (DialTimeout, TLSHandshakeTimeout), on idle pooled connections and on
//     reading a client's request header. There is deliberately no
//     ResponseHeaderTimeout: a non-streaming completion gets its response
//     header only when the whole generation is done. Servers made by
//     NewServer have no ReadTimeout or WriteTimeout for the same reason.
//   - Status codes, headers and bodies pass through as vLLM sent them: no
//     transparent compression, hop-by-hop headers handled by ReverseProxy.
//     The Host header is the client's; X-Forwarded-For gets the client's
//     address appended, X-Forwarded-Host and X-Forwarded-Proto say how the
//     client reached the proxy.
//   - A vLLM that does not answer gives 502 at once, with a body that says
//     which upstream failed and why. Nothing is retried.
//   - The environment's HTTP_PROXY and friends are ignored: the upstream is
//     the local vLLM.
package proxy
