package rustdebug_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpustack/routing-conformance/assertions/rustdebug"
)

// The Debug forms docs/routers.md#debug-forms lists, as the routers print them.
var routerForms = []string{
	"Random",
	"RoundRobin",
	"RendezvousHash",
	"CacheAware { cache_threshold: 0.3, balance_abs_threshold: 64, balance_rel_threshold: 1.5, eviction_interval_secs: 120, max_tree_size: 67108864 }",
	"PowerOfTwo { load_check_interval_secs: 5 }",
	"ConsistentHash { virtual_nodes: 160 }",
	"PrefixHash { prefix_token_count: 256, load_factor: 1.25 }",
	"Manual { eviction_interval_secs: 120, max_idle_secs: 14400 }",
	"Regular { worker_urls: [] }",
	`OpenAI { worker_urls: ["https://api.example.com"] }`,
	`VllmPrefillDecode { prefill_urls: [("http://a:8000", Some(8998))], decode_urls: ["http://b:8000", "http://c:8000"], prefill_policy: Some(RoundRobin), decode_policy: None, discovery_address: None }`,
	`PrefillDecode { prefill_urls: [("http://10.0.0.1:8000", None)], decode_urls: [], prefill_policy: Some(CacheAware { cache_threshold: 1.0, balance_abs_threshold: 64, balance_rel_threshold: 1.5, eviction_interval_secs: 120, max_tree_size: 67108864 }), decode_policy: None }`,
	"Nixl",
	"Mooncake",
	"MoriIO",
}

func TestEveryRouterDebugFormRoundTrips(t *testing.T) {
	for _, form := range routerForms {
		v, err := rustdebug.Parse(form)
		if err != nil {
			t.Errorf("Parse(%q): %v", form, err)
			continue
		}
		if got := v.String(); got != form {
			t.Errorf("String() = %q, want %q", got, form)
		}
	}
}

func TestCacheAwareFields(t *testing.T) {
	v, err := rustdebug.Parse(routerForms[3])
	if err != nil {
		t.Fatal(err)
	}
	if v.Kind != rustdebug.Struct || v.TypeName() != "CacheAware" {
		t.Fatalf("kind %v name %q", v.Kind, v.TypeName())
	}
	want := []string{"cache_threshold", "balance_abs_threshold", "balance_rel_threshold", "eviction_interval_secs", "max_tree_size"}
	if got := v.FieldNames(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("fields = %v", got)
	}
	ct, _ := v.Field("cache_threshold")
	if f, err := ct.Float(); err != nil || f != 0.3 {
		t.Errorf("cache_threshold = %v, %v", f, err)
	}
	if !ct.Matches(0.3) || !ct.Matches(float32(0.3)) || !ct.Matches("0.3") || ct.Matches(0.30001) {
		t.Error("numeric Matches is wrong")
	}
	abs, _ := v.Field("balance_abs_threshold")
	if !abs.Matches(64) || !abs.Matches(uint64(64)) || abs.Matches(65) {
		t.Error("integer Matches is wrong")
	}
	if _, ok := v.Field("nope"); ok {
		t.Error("found a missing field")
	}
}

func TestWholeFloatKeepsPointZeroAndMatchesInteger(t *testing.T) {
	v, _ := rustdebug.Parse("CacheAware { cache_threshold: 1.0 }")
	ct, _ := v.Field("cache_threshold")
	if ct.Text != "1.0" || !ct.Matches(1) || !ct.Matches(1.0) {
		t.Errorf("%+v", ct)
	}
}

func TestVllmPrefillDecodeTree(t *testing.T) {
	v, err := rustdebug.Parse(routerForms[10])
	if err != nil {
		t.Fatal(err)
	}
	pu, _ := v.Field("prefill_urls")
	if pu.Kind != rustdebug.List || len(pu.Items) != 1 {
		t.Fatalf("prefill_urls = %v", pu)
	}
	pair := pu.Items[0]
	if pair.Kind != rustdebug.Tuple || pair.Name != "" || len(pair.Items) != 2 {
		t.Fatalf("pair = %#v", pair)
	}
	if pair.Items[0].Kind != rustdebug.String || pair.Items[0].Text != "http://a:8000" {
		t.Errorf("url = %#v", pair.Items[0])
	}
	port, ok := pair.Items[1].Unwrap()
	if !ok || !port.Matches(8998) {
		t.Errorf("bootstrap port = %v", pair.Items[1])
	}
	pp, _ := v.Field("prefill_policy")
	if inner, ok := pp.Unwrap(); !ok || inner.TypeName() != "RoundRobin" || !pp.Matches("Some(RoundRobin)") {
		t.Errorf("prefill_policy = %v", pp)
	}
	dp, _ := v.Field("decode_policy")
	if dp.Kind != rustdebug.None || !dp.Matches(nil) || dp.Matches("RoundRobin") {
		t.Errorf("decode_policy = %v", dp)
	}
	du, _ := v.Field("decode_urls")
	if len(du.Items) != 2 || !du.Items[1].Matches("http://c:8000") {
		t.Errorf("decode_urls = %v", du)
	}
}

func TestNestedPolicyInsideSome(t *testing.T) {
	v, _ := rustdebug.Parse(routerForms[11])
	pp, _ := v.Field("prefill_policy")
	inner, ok := pp.Unwrap()
	if !ok || inner.TypeName() != "CacheAware" {
		t.Fatalf("prefill_policy = %v", pp)
	}
	if ct, _ := inner.Field("cache_threshold"); !ct.Matches(1) {
		t.Errorf("nested cache_threshold = %v", ct)
	}
}

func TestPrettyDebugForm(t *testing.T) {
	pretty := "VllmPrefillDecode {\n    prefill_urls: [\n        (\n            \"http://a:8000\",\n            Some(\n                8998,\n            ),\n        ),\n    ],\n    decode_urls: [],\n    prefill_policy: None,\n    decode_policy: None,\n    discovery_address: Some(\n        \"tcp://10.0.0.9:30001\",\n    ),\n}"
	v, err := rustdebug.Parse(pretty)
	if err != nil {
		t.Fatal(err)
	}
	want := `VllmPrefillDecode { prefill_urls: [("http://a:8000", Some(8998))], decode_urls: [], prefill_policy: None, decode_policy: None, discovery_address: Some("tcp://10.0.0.9:30001") }`
	if v.String() != want {
		t.Errorf("String() = %s", v)
	}
}

func TestOtherStdForms(t *testing.T) {
	for _, c := range []struct {
		in   string
		kind rustdebug.Kind
		out  string
	}{
		{`{"a": 1, "b": [2]}`, rustdebug.Map, `{"a": 1, "b": [2]}`},
		{`{1, 2}`, rustdebug.Set, `{1, 2}`},
		{`{}`, rustdebug.Map, `{}`},
		{`()`, rustdebug.Tuple, `()`},
		{`Wrapper(5, "x")`, rustdebug.Tuple, `Wrapper(5, "x")`},
		{`'a'`, rustdebug.Char, `'a'`},
		{`"quote \" and \\ and \n and \u{1b}"`, rustdebug.String, `"quote \" and \\ and \n and \u{1b}"`},
		{`-1.5e-7`, rustdebug.Number, `-1.5e-7`},
		{`120s`, rustdebug.Number, `120s`},
		{`1.5ms`, rustdebug.Number, `1.5ms`},
		{`inf`, rustdebug.Ident, `inf`},
		{`-inf`, rustdebug.Ident, `-inf`},
		{`std::time::Instant { t: 5 }`, rustdebug.Struct, `std::time::Instant { t: 5 }`},
		{`Config { a: 1, .. }`, rustdebug.Struct, `Config { a: 1, .. }`},
		{`Empty {}`, rustdebug.Struct, `Empty {}`},
		{`true`, rustdebug.Ident, `true`},
	} {
		v, err := rustdebug.Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%s): %v", c.in, err)
			continue
		}
		if v.Kind != c.kind || v.String() != c.out {
			t.Errorf("Parse(%s) = %v %s; want %v %s", c.in, v.Kind, v, c.kind, c.out)
		}
	}
	v, _ := rustdebug.Parse(`"a\u{1b}b"`)
	if v.Text != "a\x1bb" {
		t.Errorf("escape decoded to %q", v.Text)
	}
	if v, _ := rustdebug.Parse("NaN"); !v.Matches(math.NaN()) {
		t.Error("NaN")
	}
	if v, _ := rustdebug.Parse("true"); !v.Matches(true) || v.Matches(false) {
		t.Error("bool")
	}
}

func TestJSONIsTheDebugText(t *testing.T) {
	v, _ := rustdebug.Parse(routerForms[10])
	b, err := json.Marshal(map[string]rustdebug.Value{"mode": v})
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]rustdebug.Value
	if err := json.Unmarshal(b, &back); err != nil || !back["mode"].Equal(v) {
		t.Errorf("round trip through %s: %v", b, err)
	}
	if err := json.Unmarshal([]byte(`{"mode":"Regular {"}`), &back); err == nil {
		t.Error("bad Debug text accepted")
	}
}

func TestParsePrefixStopsAfterTheValue(t *testing.T) {
	s := "CacheAware { cache_threshold: 0.3 } | kv_connector: Nixl"
	v, n, err := rustdebug.ParsePrefix(s)
	if err != nil || v.TypeName() != "CacheAware" || s[n:] != " | kv_connector: Nixl" {
		t.Errorf("%v %q %v", v, s[n:], err)
	}
	v, n, err = rustdebug.ParsePrefix("RoundRobin | max_payload: 512MB")
	if err != nil || v.Kind != rustdebug.Ident || n != len("RoundRobin") {
		t.Errorf("%v %d %v", v, n, err)
	}
}

func TestSyntaxErrorsSayWhere(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"CacheAware { cache_threshold = 0.3 }", "expected ':' after field CacheAware.cache_threshold"},
		{"CacheAware { cache_threshold: 0.3", "expected ',' or '}'"},
		{`["http://a:8000"`, "expected ',' or ']'"},
		{`"unterminated`, "unterminated literal"},
		{"Some(1, 2)", "Some holds exactly one value"},
		{"RoundRobin trailing", "after the value"},
		{"", "end of input"},
		{"| x", "expected a value"},
		{`"\q"`, `unknown escape \q`},
		{strings.Repeat("[", 1000), "nested deeper"},
	} {
		_, err := rustdebug.Parse(c.in)
		var se *rustdebug.SyntaxError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%.40q) error = %v; want one containing %q", c.in, err, c.want)
		}
	}
}

func FuzzParseDebugForm(f *testing.F) {
	for _, s := range routerForms {
		f.Add(s)
	}
	for _, s := range []string{`{"a": 1}`, `{1, 2}`, `'x'`, `"\u{1b}[0m"`, "Foo { .. }", "-inf", "1e5", "1e", "a::b::C(())", "Empty {}", "[[[]]]", "Some(None)", "(1,)", "-", "\"\\u{110000}\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := rustdebug.Parse(s)
		if err != nil {
			var se *rustdebug.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			_ = err.Error()
			return
		}
		_, _, _ = rustdebug.ParsePrefix(s)
		if !utf8.ValidString(s) {
			return
		}
		// What String() writes must read back to the same tree.
		out := v.String()
		w, err := rustdebug.Parse(out)
		if err != nil {
			t.Fatalf("String() of %q = %q does not parse: %v", s, out, err)
		}
		if !w.Equal(v) && !strings.Contains(out, "NaN") {
			t.Fatalf("round trip changed %q: %q vs %q", s, out, w.String())
		}
	})
}
