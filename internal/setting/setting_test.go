package setting

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTwoIntervals(t *testing.T) {
	if err := TwoIntervals("w", 2*time.Second, time.Second); err != nil {
		t.Errorf("a window of exactly two intervals is refused: %v", err)
	}
	err := TwoIntervals("collector.Config.Windows", 90*time.Second, time.Minute)
	const want = "collector.Config.Windows=1m30s is shorter than two scrape intervals (2m0s)"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want %q...", err, want)
	}
	flag := For(err, func(s string) string {
		if s == "collector.Config.Windows" {
			return "--derive.window"
		}
		return ""
	})
	if !strings.HasPrefix(flag.Error(), "--derive.window=1m30s is shorter than two scrape intervals (2m0s)") || !strings.Contains(flag.Error(), "lengthen the window") {
		t.Errorf("For: got %q", flag)
	}
	if err.Error() == flag.Error() {
		t.Error("For changed err itself")
	}
	other := errors.New("x")
	if For(other, func(string) string { return "--y" }) != other {
		t.Error("For rewrote an error that is no *Error")
	}
}

func TestScrapeURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ftp://x/metrics", "u=ftp://x/metrics is not http(s): the scheme must be http or https"},
		{"http:///metrics", "u=http:///metrics has no host"},
		{"http://user:s3cret@host:port/metrics", "u is not a URL"},
		{"http://user:s3cret@/metrics", "u=http://user:xxxxx@/metrics has no host"},
		{"http://:8000/metrics", "u=http://:8000/metrics has no host"},
	} {
		_, err := ScrapeURL("u", tc.in)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ScrapeURL(%q) = %v, want %q... without the password", tc.in, err, tc.want)
		}
	}
	if u, err := ScrapeURL("u", "https://127.0.0.1:8000/metrics"); err != nil || u.Host != "127.0.0.1:8000" {
		t.Errorf("a good URL: %v, %v", u, err)
	}
}
