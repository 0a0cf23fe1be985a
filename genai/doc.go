// Package genai builds the OpenTelemetry GenAI view: the server histograms
// of the GenAI semantic conventions (gen_ai.server.time_to_first_token,
// gen_ai.server.time_per_output_token, gen_ai.server.request.duration) in
// their Prometheus spelling, from the roles of the canonical page, so that
// a panel can put a gateway's numbers beside any engine's.
//
// Each histogram is the role's family summed over engines per model with
// the routing view's reset-safe rules (routing.Sums), then re-bucketed to
// the bounds the conventions advise where those are a subset of the
// engine's bounds (exact: the cumulative counts at the shared bounds),
// else left with the engine's bounds. Counts are never interpolated.
package genai
