package operator

import (
	"fmt"
	"regexp"
	"strings"
)

// The API server's name rules, with its messages (apimachinery
// util/validation). Restated here because that package drags klog and
// k8s.io/utils into the module graph for three regular expressions.
const (
	dns1123LabelFmt     = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
	dns1123SubdomainFmt = dns1123LabelFmt + "(\\." + dns1123LabelFmt + ")*"
	dns1035LabelFmt     = "[a-z]([-a-z0-9]*[a-z0-9])?"
)

var (
	dns1123LabelRE     = regexp.MustCompile("^" + dns1123LabelFmt + "$")
	dns1123SubdomainRE = regexp.MustCompile("^" + dns1123SubdomainFmt + "$")
	dns1035LabelRE     = regexp.MustCompile("^" + dns1035LabelFmt + "$")
)

func maxLenError(n int) string { return fmt.Sprintf("must be no more than %d characters", n) }

func regexError(msg, format string, examples ...string) string {
	quoted := make([]string, len(examples))
	for i, e := range examples {
		quoted[i] = "'" + e + "'"
	}
	return msg + " (e.g. " + strings.Join(quoted, " or ") + ", regex used for validation is '" + format + "')"
}

// isDNS1123Subdomain is isDNS1123Subdomain (object names).
func isDNS1123Subdomain(v string) []string {
	var errs []string
	if len(v) > 253 {
		errs = append(errs, maxLenError(253))
	}
	if !dns1123SubdomainRE.MatchString(v) {
		errs = append(errs, regexError("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "+
			"characters, '-' or '.', and must start and end with an alphanumeric character",
			dns1123SubdomainFmt, "example.com"))
	}
	return errs
}

// isDNS1123Label is isDNS1123Label (hostnames).
func isDNS1123Label(v string) []string {
	var errs []string
	if len(v) > 63 {
		errs = append(errs, maxLenError(63))
	}
	if !dns1123LabelRE.MatchString(v) {
		if dns1123SubdomainRE.MatchString(v) {
			errs = append(errs, "must not contain dots")
		} else {
			errs = append(errs, regexError("a lowercase RFC 1123 label must consist of lower case alphanumeric "+
				"characters or '-', and must start and end with an alphanumeric character",
				dns1123LabelFmt, "my-name", "123-abc"))
		}
	}
	return errs
}

// isDNS1035Label is isDNS1035Label (Service names).
func isDNS1035Label(v string) []string {
	var errs []string
	if len(v) > 63 {
		errs = append(errs, maxLenError(63))
	}
	if !dns1035LabelRE.MatchString(v) {
		errs = append(errs, regexError("a DNS-1035 label must consist of lower case alphanumeric characters or "+
			"'-', start with an alphabetic character, and end with an alphanumeric character",
			dns1035LabelFmt, "my-name", "abc-123"))
	}
	return errs
}
