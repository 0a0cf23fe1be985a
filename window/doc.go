// Package window keeps a short, reset-corrected history of the upstream
// samples that derivations read, so that rates, ratios, means and quantiles
// over sliding windows can be computed without a time-series database.
//
// It knows nothing of metric names: the caller says, as Inputs, which
// sample names to keep, under which key and of which kind.
package window
