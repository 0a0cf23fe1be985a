// Package derive computes the derived gauges (windowed rates, ratios, means
// and quantiles) from a window.History, grouped by the labels a page needs:
// model_name and engine on the full page, model_name on the routing view.
package derive
