package setting

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/prometheus/common/model"
)

// Error is a rejected setting.
type Error struct {
	// Setting names the setting as the library's API does
	// ("collector.Config.Windows"); Name, when set, as the operator gave it.
	Setting, Name string
	// Value is the bad value as given; Rule what is wrong with it, as a
	// predicate ("is shorter than ..."); Fix what to give instead.
	Value, Rule, Fix string
}

func (e *Error) Error() string {
	name := e.Setting
	if e.Name != "" {
		name = e.Name
	}
	if e.Value == "" {
		return fmt.Sprintf("%s %s; %s", name, e.Rule, e.Fix)
	}
	return fmt.Sprintf("%s=%s %s; %s", name, e.Value, e.Rule, e.Fix)
}

// For returns err with the setting renamed by name (a flag, from the
// setting's API name) when err is an *Error whose setting name knows; any
// other error is returned as it is.
func For(err error, name func(setting string) string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	if n := name(e.Setting); n != "" {
		out := *e
		out.Name = n
		return &out
	}
	return err
}

// TwoIntervals is the rule every window follows: it covers two scrape
// intervals, the least a rate or a change can be read from.
func TwoIntervals(setting string, window, interval time.Duration) error {
	if window >= 2*interval {
		return nil
	}
	return &Error{
		Setting: setting, Value: model.Duration(window).String(),
		Rule: fmt.Sprintf("is shorter than two scrape intervals (%s): a rate or a change needs two scrapes inside the window", 2*interval),
		Fix:  "lengthen the window or shorten the scrape interval",
	}
}

// ScrapeURL is the rule for the upstream's metrics URL: http or https,
// with a host. The error never quotes a password.
func ScrapeURL(setting, raw string) (*url.URL, error) {
	const fix = "give one like http://127.0.0.1:8000/metrics"
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the whole URL, password included:
		// keep only its cause.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, &Error{Setting: setting, Rule: fmt.Sprintf("is not a URL (%v)", err), Fix: fix}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, &Error{Setting: setting, Value: u.Redacted(), Rule: "is not http(s): the scheme must be http or https", Fix: fix}
	}
	// a port alone (http://:8000/metrics) would dial every local address
	// unasked: the host is named, 127.0.0.1 included
	if u.Hostname() == "" {
		return nil, &Error{Setting: setting, Value: u.Redacted(), Rule: "has no host", Fix: fix}
	}
	return u, nil
}
