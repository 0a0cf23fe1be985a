package mapping

import (
	"strings"
	"testing"
)

// Every value of llm-d's llm-d.ai/role label is a role, read from its
// parts; any other well-formed value is served with a warning, a malformed
// one as both: a role never stops the sidecar.
func TestParsePodRole(t *testing.T) {
	for _, c := range []struct {
		in, value, diag         string
		prefill, decode, encode bool
		warns                   bool
	}{
		{"", "both", "", true, true, false, false},
		{"both", "both", "", true, true, false, false},
		{"prefill", "prefill", "prefill", true, false, false, false},
		{"decode", "decode", "decode", false, true, false, false},
		{"encode", "encode", "", false, false, true, false},
		{"prefill-decode", "prefill-decode", "", true, true, false, false},
		{"encode-prefill", "encode-prefill", "prefill", true, false, true, false},
		{"encode-prefill-decode", "encode-prefill-decode", "", true, true, true, false},
		// Not llm-d's: served as given, stages from the parts.
		{"decode-prefill", "decode-prefill", "", true, true, false, true},
		{"Prefill", "Prefill", "", true, true, false, true},
		{"worker", "worker", "", true, true, false, true},
		{"encode-decode", "encode-decode", "decode", false, true, true, true},
		// Malformed: served as both.
		{"pre fill", "both", "", true, true, false, true},
		{"-prefill", "both", "", true, true, false, true},
		{strings.Repeat("p", 64), "both", "", true, true, false, true},
		{"prefill\n", "both", "", true, true, false, true},
	} {
		r, w := ParsePodRole(c.in)
		if r.Value != c.value || r.Prefill != c.prefill || r.Decode != c.decode || r.Encode != c.encode || r.DiagnosisRole() != c.diag {
			t.Errorf("ParsePodRole(%q) = %+v (diagnosis %q), want value %q prefill %v decode %v encode %v (diagnosis %q)",
				c.in, r, r.DiagnosisRole(), c.value, c.prefill, c.decode, c.encode, c.diag)
		}
		if (w != "") != c.warns {
			t.Errorf("ParsePodRole(%q) warning %q, want one: %v", c.in, w, c.warns)
		}
		if w != "" && (!strings.Contains(w, "encode-prefill-decode") || len(w) > 500) {
			t.Errorf("ParsePodRole(%q) warning %q must list llm-d's values and stay short", c.in, w)
		}
	}
}
