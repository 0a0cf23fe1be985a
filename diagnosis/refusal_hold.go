package diagnosis

// staysBeyond says whether a named finding judged against the baseline,
// whose evidence no longer holds at the undivided α, still shows beyond
// every sub-window of that baseline (topoEval.beyond): it is then held by
// its hysteresis, HoldEvaluations evaluations, as the incident's causes
// are; one whose window fell back within the pod's bursts clears at once
// (TestAdmissionClearsWithItsEvidence).
//
// Why (issue 30): at a pod whose bursts already reach its queue cap, the
// refused share is widened by those bursts (φ 70-160 at 90-95 % of
// capacity), and an overload refusing 40-50 % against 18 % reads p =
// 0.005-0.02 from one window to the next around the α of 0.01: cleared at
// the first p above it, admission waited three windows at α / 5 to be
// named again (the bursty simulator at 90 %, seed 11, 17m37-17m57).
func staysBeyond(e *topoEval, k int) bool {
	return e.beyond[k]
}

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
