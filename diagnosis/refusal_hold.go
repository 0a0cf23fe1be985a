package diagnosis

// spanCarries says whether admission, named or within the refusal
// episode that named it, is held (and, in the episode, named again) on
// its span alone (onSpan: the last refusalSpans[j] windows refuse more
// than every such span of the baseline did, significantly at the naming
// α, the recent window up by the minimum change and not fallen back from
// the span's share by it, sustainedRefusals), without asking the recent
// window also beyond every sub-window of the baseline: that is the
// window's scale, where the pod's bursts hide a change by design; the
// span is the overload's. A window that fell back from the span's share
// is the overload's end, not its dip, and clears it
// (TestAdmissionNotHeldByTheSpanOnceTheRefusalsFell).
//
// Why (issue 30): at 90 % of capacity (bursty seed 12) the overload's
// later minutes refused 0.2-0.4 a window against a baseline of 0.08 whose
// bursts reached 0.31, its last minute 0.19-0.24 against every minute of
// the baseline's at most 0.14 (p < 0.001); named on that minute, it was
// cleared by the next window within the bursts, and the windows beyond
// them came one or two in a row, never the three naming asks: missed in
// 27 % of the overload's polls.
func spanCarries(x *topoInput, k int, named, onSpan bool) bool {
	return (named || x.episode[k]) && onSpan
}
