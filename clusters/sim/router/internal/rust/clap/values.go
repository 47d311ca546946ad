package clap

import (
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// Rust's ParseIntError / ParseFloatError Display texts, which clap appends to
// "invalid value '<v>' for '<arg>': ".
const (
	errIntEmpty    = "cannot parse integer from empty string"
	errIntDigit    = "invalid digit found in string"
	errIntTooLarge = "number too large to fit in target type"
	errIntTooSmall = "number too small to fit in target type"
	errFloatEmpty  = "cannot parse float from empty string"
	errFloatSyntax = "invalid float literal"
)

// checkValue runs the value parser clap derives for t and returns the error
// text ("" when v is valid).
func checkValue(t ValueType, v string) string {
	switch t {
	case U16:
		return rangedI64(v, 0, 65535)
	case U32:
		return rangedI64(v, 0, 4294967295)
	case I32:
		return rangedI64(v, -2147483648, 2147483647)
	case I64:
		_, msg := parseRustInt(v, true)
		return msg
	case U64, Usize:
		// RangedU64ValueParser / FromStr for usize: u64::from_str.
		_, msg := parseRustInt(v, false)
		return msg
	case F32, F64:
		_, msg := parseRustFloat(v)
		return msg
	default:
		return ""
	}
}

// rangedI64 is clap's RangedI64ValueParser: i64::from_str, then the range.
func rangedI64(v string, lo, hi int64) string {
	n, msg := parseRustInt(v, true)
	if msg != "" {
		return msg
	}
	i := n.Int64()
	if i < lo || i > hi {
		return strconv.FormatInt(i, 10) + " is not in " + strconv.FormatInt(lo, 10) + "..=" + strconv.FormatInt(hi, 10)
	}
	return ""
}

// parseRustInt mirrors i64::from_str (signed) or u64::from_str (unsigned):
// an optional sign ('-' only when signed), then ASCII digits.
func parseRustInt(v string, signed bool) (*big.Int, string) {
	if v == "" {
		return nil, errIntEmpty
	}
	s := v
	neg := false
	switch s[0] {
	case '+':
		s = s[1:]
	case '-':
		if signed {
			neg = true
			s = s[1:]
		}
	}
	if s == "" {
		return nil, errIntDigit
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return nil, errIntDigit
		}
	}
	n, _ := new(big.Int).SetString(s, 10)
	if neg {
		n.Neg(n)
	}
	if signed {
		if n.Cmp(big.NewInt(9223372036854775807)) > 0 {
			return nil, errIntTooLarge
		}
		if n.Cmp(big.NewInt(-9223372036854775808)) < 0 {
			return nil, errIntTooSmall
		}
	} else if n.Cmp(new(big.Int).SetUint64(18446744073709551615)) > 0 {
		return nil, errIntTooLarge
	}
	return n, ""
}

// rustFloat is the grammar of Rust's f32/f64 FromStr: decimal with optional
// exponent, or inf/infinity/nan, with an optional sign; no hex, no '_'.
var rustFloat = regexp.MustCompile(`^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf|infinity|nan))$`)

func parseRustFloat(v string) (float64, string) {
	if v == "" {
		return 0, errFloatEmpty
	}
	if !rustFloat.MatchString(v) {
		return 0, errFloatSyntax
	}
	f, err := strconv.ParseFloat(strings.ToLower(v), 64)
	if err != nil {
		// Out-of-range literals become ±inf or 0 in Rust, not errors.
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, ""
		}
		return 0, errFloatSyntax
	}
	return f, ""
}

// jaro is strsim's jaro over Unicode scalar values.
func jaro(a, b string) float64 {
	ar, br := []rune(a), []rune(b)
	la, lb := len(ar), len(br)
	if la == 0 && lb == 0 {
		return 1
	}
	if la == 0 || lb == 0 {
		return 0
	}
	search := max(la, lb) / 2
	if search > 0 {
		search--
	}
	aFlags := make([]bool, la)
	bFlags := make([]bool, lb)
	matches := 0
	for i, ca := range ar {
		lo := 0
		if i > search {
			lo = i - search
		}
		hi := min(lb, i+search+1)
		for j := lo; j < hi; j++ {
			if ca == br[j] && !bFlags[j] {
				aFlags[i], bFlags[j] = true, true
				matches++
				break
			}
		}
	}
	if matches == 0 {
		return 0
	}
	transpositions := 0
	j := 0
	for i, ca := range ar {
		if !aFlags[i] {
			continue
		}
		for !bFlags[j] {
			j++
		}
		if ca != br[j] {
			transpositions++
		}
		j++
	}
	transpositions /= 2
	m := float64(matches)
	return (m/float64(la) + m/float64(lb) + (m-float64(transpositions))/m) / 3
}

// didYouMean is clap's suggestions::did_you_mean: every candidate with Jaro
// confidence above 0.7, sorted by ascending confidence with ties kept in
// input order; callers take the last (most similar, later on ties).
func didYouMean(v string, candidates []string) []string {
	type cand struct {
		conf float64
		s    string
	}
	var out []cand
	for _, c := range candidates {
		conf := jaro(v, c)
		if conf > 0.7 {
			// Insert after every element with confidence <= conf.
			pos := len(out)
			for k, e := range out {
				if e.conf > conf {
					pos = k
					break
				}
			}
			out = append(out, cand{})
			copy(out[pos+1:], out[pos:])
			out[pos] = cand{conf, c}
		}
	}
	res := make([]string, len(out))
	for i, c := range out {
		res[i] = c.s
	}
	return res
}
