package clap

import (
	"errors"
	"math"
	"strings"
	"testing"
)

var vrPolicies = []string{"random", "round_robin", "cache_aware", "power_of_two", "consistent_hash", "rendezvous_hash"}

// testCmd is a cut-down vllm-router CLI: enough flags of every kind.
func testCmd() *Command {
	return &Command{
		BinName: "vllm-router",
		Version: "0.1.15",
		Args: []Arg{
			{Long: "host", Default: "127.0.0.1", HasDefault: true},
			{Long: "port", Type: U16, Default: "30000", HasDefault: true},
			{Long: "worker-urls", Action: AppendMany},
			{Long: "policy", Default: "cache_aware", HasDefault: true, Possible: vrPolicies},
			{Long: "decode", Action: Append},
			{Long: "prefill-policy", Possible: vrPolicies},
			{Long: "cache-threshold", Type: F32, Default: "0.3", HasDefault: true},
			{Long: "max-tree-size", Type: Usize, Default: "67108864", HasDefault: true},
			{Long: "service-discovery", Action: SetTrue},
			{Long: "selector", Action: AppendMany},
			{Long: "request-timeout-secs", Type: U64, Default: "1800", HasDefault: true},
			{Long: "backend", Default: "vllm", HasDefault: true, Possible: []string{"vllm", "trtllm", "openai", "anthropic"}, Aliases: []string{"runtime"}},
			{Long: "max-concurrent-requests", Type: I32, Default: "-1", HasDefault: true},
		},
	}
}

func parseErr(t *testing.T, cmd *Command, args ...string) *Error {
	t.Helper()
	_, err := Parse(cmd, args)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse(%q) = %v, want a clap error", args, err)
	}
	return ce
}

func TestInvalidPolicyWithTip(t *testing.T) {
	e := parseErr(t, testCmd(), "--host=0.0.0.0", "--policy", "roundrobin")
	want := "error: invalid value 'roundrobin' for '--policy <POLICY>'\n" +
		"  [possible values: random, round_robin, cache_aware, power_of_two, consistent_hash, rendezvous_hash]\n" +
		"\n" +
		"  tip: a similar value exists: 'round_robin'\n" +
		"\n" +
		"For more information, try '--help'.\n"
	if e.Text != want {
		t.Fatalf("text:\n%q\nwant:\n%q", e.Text, want)
	}
	if e.ExitCode() != 2 || e.ToStdout() {
		t.Fatalf("exit %d stdout %v, want 2 on stderr", e.ExitCode(), e.ToStdout())
	}
}

func TestInvalidPolicyWithoutTip(t *testing.T) {
	e := parseErr(t, testCmd(), "--policy=foo")
	want := "error: invalid value 'foo' for '--policy <POLICY>'\n" +
		"  [possible values: random, round_robin, cache_aware, power_of_two, consistent_hash, rendezvous_hash]\n" +
		"\n" +
		"For more information, try '--help'.\n"
	if e.Text != want {
		t.Fatalf("text:\n%q\nwant:\n%q", e.Text, want)
	}
}

func TestInvalidPrefillPolicyNamesItsPlaceholder(t *testing.T) {
	e := parseErr(t, testCmd(), "--prefill-policy", "round-robin")
	want := "error: invalid value 'round-robin' for '--prefill-policy <PREFILL_POLICY>'\n" +
		"  [possible values: random, round_robin, cache_aware, power_of_two, consistent_hash, rendezvous_hash]\n" +
		"\n" +
		"  tip: a similar value exists: 'round_robin'\n" +
		"\n" +
		"For more information, try '--help'.\n"
	if e.Text != want {
		t.Fatalf("text:\n%q\nwant:\n%q", e.Text, want)
	}
}

func TestScalarGivenTwiceCannotBeUsedMultipleTimes(t *testing.T) {
	e := parseErr(t, testCmd(), "--request-timeout-secs=60", "--policy", "random", "--request-timeout-secs", "90")
	want := "error: the argument '--request-timeout-secs <REQUEST_TIMEOUT_SECS>' cannot be used multiple times\n" +
		"\n" +
		"Usage: vllm-router [OPTIONS]\n" +
		"\n" +
		"For more information, try '--help'.\n"
	if e.Text != want || e.Kind != ArgumentConflict || e.ExitCode() != 2 {
		t.Fatalf("kind %d text:\n%q\nwant:\n%q", e.Kind, e.Text, want)
	}
}

func TestBoolFlagGivenTwiceIsAnError(t *testing.T) {
	e := parseErr(t, testCmd(), "--service-discovery", "--service-discovery")
	if !strings.HasPrefix(e.Text, "error: the argument '--service-discovery' cannot be used multiple times\n") {
		t.Fatalf("text %q", e.Text)
	}
}

func TestUnknownArgumentWithoutSuggestion(t *testing.T) {
	e := parseErr(t, testCmd(), "--foo", "bar")
	want := "error: unexpected argument '--foo' found\n" +
		"\n" +
		"Usage: vllm-router [OPTIONS]\n" +
		"\n" +
		"For more information, try '--help'.\n"
	if e.Text != want || e.Kind != UnknownArgument {
		t.Fatalf("text:\n%q\nwant:\n%q", e.Text, want)
	}
}

func TestUnknownArgumentSuggestsAndUsesSmartUsage(t *testing.T) {
	// clap adds the suggested flag to the matches, so the usage names it
	// after the flags already given.
	e := parseErr(t, testCmd(), "--host=0.0.0.0", "--selector", "a=b", "c=d", "--polcy=random")
	want := "error: unexpected argument '--polcy' found\n" +
		"\n" +
		"  tip: a similar argument exists: '--policy'\n" +
		"\n" +
		"Usage: vllm-router --host <HOST> --selector [<SELECTOR>...] --policy <POLICY>\n" +
		"\n" +
		"For more information, try '--help'.\n"
	if e.Text != want {
		t.Fatalf("text:\n%q\nwant:\n%q", e.Text, want)
	}
}

func TestUnknownShortFlagAndNegativeNumber(t *testing.T) {
	e := parseErr(t, testCmd(), "--max-concurrent-requests", "-1")
	if !strings.HasPrefix(e.Text, "error: unexpected argument '-1' found\n\nUsage: vllm-router [OPTIONS]\n") {
		t.Fatalf("text %q", e.Text)
	}
	m, err := Parse(testCmd(), []string{"--max-concurrent-requests=-1"})
	if err != nil || m.Int("max-concurrent-requests") != -1 {
		t.Fatalf("attached negative: %v %v", m, err)
	}
}

func TestValueRequiredButNoneSupplied(t *testing.T) {
	e := parseErr(t, testCmd(), "--policy", "--host", "x")
	want := "error: a value is required for '--policy <POLICY>' but none was supplied\n" +
		"  [possible values: random, round_robin, cache_aware, power_of_two, consistent_hash, rendezvous_hash]\n" +
		"\n" +
		"For more information, try '--help'.\n"
	if e.Text != want {
		t.Fatalf("text:\n%q\nwant:\n%q", e.Text, want)
	}
}

func TestNumericValueParsersUseRustMessages(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--port", "99999"}, "error: invalid value '99999' for '--port <PORT>': 99999 is not in 0..=65535\n"},
		{[]string{"--port=abc"}, "error: invalid value 'abc' for '--port <PORT>': invalid digit found in string\n"},
		{[]string{"--port="}, "error: invalid value '' for '--port <PORT>': cannot parse integer from empty string\n"},
		{[]string{"--request-timeout-secs=-5"}, "error: invalid value '-5' for '--request-timeout-secs <REQUEST_TIMEOUT_SECS>': invalid digit found in string\n"},
		{[]string{"--cache-threshold=x"}, "error: invalid value 'x' for '--cache-threshold <CACHE_THRESHOLD>': invalid float literal\n"},
		{[]string{"--max-tree-size=99999999999999999999"}, "error: invalid value '99999999999999999999' for '--max-tree-size <MAX_TREE_SIZE>': number too large to fit in target type\n"},
	}
	for _, c := range cases {
		e := parseErr(t, testCmd(), c.args...)
		want := c.want + "\nFor more information, try '--help'.\n"
		if e.Text != want {
			t.Errorf("%q:\n%q\nwant\n%q", c.args, e.Text, want)
		}
	}
}

func TestBoolFlagWithAttachedValue(t *testing.T) {
	e := parseErr(t, testCmd(), "--host", "h", "--service-discovery=true")
	want := "error: unexpected value 'true' for '--service-discovery' found; no more were expected\n" +
		"\n" +
		"Usage: vllm-router --host <HOST> --service-discovery\n" +
		"\n" +
		"For more information, try '--help'.\n"
	if e.Text != want {
		t.Fatalf("text:\n%q\nwant:\n%q", e.Text, want)
	}
}

func TestStrayPositional(t *testing.T) {
	e := parseErr(t, testCmd(), "--policy", "random", "extra")
	want := "error: unexpected argument 'extra' found\n\nUsage: vllm-router [OPTIONS]\n\nFor more information, try '--help'.\n"
	if e.Text != want {
		t.Fatalf("text:\n%q\nwant:\n%q", e.Text, want)
	}
}

func TestVecFlagsTakeValuesUntilNextFlag(t *testing.T) {
	m, err := Parse(testCmd(), []string{
		"--selector", "app=x", "role=y", "--service-discovery",
		"--selector=tier=z", "--decode", "http://d1", "--decode=http://d2",
		"--worker-urls", "--runtime", "openai",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Values("selector"); strings.Join(got, ",") != "app=x,role=y,tier=z" {
		t.Fatalf("selector %q", got)
	}
	if got := m.Values("decode"); strings.Join(got, ",") != "http://d1,http://d2" {
		t.Fatalf("decode %q", got)
	}
	if !m.IsPresent("worker-urls") || len(m.Values("worker-urls")) != 0 {
		t.Fatalf("worker-urls %v", m.Values("worker-urls"))
	}
	if !m.Bool("service-discovery") || m.Value("backend") != "openai" {
		t.Fatalf("bool/alias wrong: %v %q", m.Bool("service-discovery"), m.Value("backend"))
	}
	if m.Value("policy") != "cache_aware" || m.Uint("port") != 30000 || m.Float32("cache-threshold") != 0.3 {
		t.Fatalf("defaults: %q %d %v", m.Value("policy"), m.Uint("port"), m.Float32("cache-threshold"))
	}
	if _, ok := m.Optional("prefill-policy"); ok {
		t.Fatal("prefill-policy should be absent")
	}
}

func TestHelpAndVersionExitZero(t *testing.T) {
	e := parseErr(t, testCmd(), "--version")
	if e.Text != "vllm-router 0.1.15\n" || e.ExitCode() != 0 || !e.ToStdout() {
		t.Fatalf("version: %q %d", e.Text, e.ExitCode())
	}
	e = parseErr(t, testCmd(), "-h")
	if e.Kind != DisplayHelp || e.ExitCode() != 0 || !strings.Contains(e.Text, "--policy <POLICY>") {
		t.Fatalf("help: %q", e.Text)
	}
}

func sgCmd() *Command {
	c := testCmd()
	c.BinName = "sgl-model-gateway"
	c.Version = ""
	c.Subcommands = []Subcommand{{Name: "launch", Aliases: []string{"start"}}}
	c.ArgsConflictsWithSubcommands = true
	return c
}

func TestSubcommandUsageHasTwoLines(t *testing.T) {
	e := parseErr(t, sgCmd(), "--request-timeout-secs=1", "--request-timeout-secs=2")
	want := "error: the argument '--request-timeout-secs <REQUEST_TIMEOUT_SECS>' cannot be used multiple times\n" +
		"\n" +
		"Usage: sgl-model-gateway [OPTIONS]\n" +
		"       sgl-model-gateway <COMMAND>\n" +
		"\n" +
		"For more information, try '--help'.\n"
	if e.Text != want {
		t.Fatalf("text:\n%q\nwant:\n%q", e.Text, want)
	}
	m, err := Parse(sgCmd(), []string{"launch", "--policy", "random"})
	if err != nil || m.Subcommand != "launch" || m.Value("policy") != "random" {
		t.Fatalf("launch: %v %v", m, err)
	}
	e = parseErr(t, sgCmd(), "start", "--port", "x")
	if !strings.Contains(e.Text, "'--port <PORT>': invalid digit") {
		t.Fatalf("start: %q", e.Text)
	}
}

func TestJaroMatchesStrsim(t *testing.T) {
	cases := []struct {
		a, b string
		want float64
	}{
		{"", "", 1},
		{"", "a", 0},
		{"a", "b", 0},
		{"martha", "marhta", 0.9444444444444445},
		{"dixon", "dicksonx", 0.7666666666666666},
		{"jones", "johnson", 0.7904761904761904},
		{"roundrobin", "round_robin", (1 + 10.0/11 + 1) / 3},
	}
	for _, c := range cases {
		if got := jaro(c.a, c.b); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("jaro(%q,%q)=%v want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestDidYouMeanThresholdIsStrictAndLaterWinsTies(t *testing.T) {
	// "ab" vs "ax": jaro = (1/2+1/2+1)/3 = 0.6667 -> no suggestion.
	if got := didYouMean("ab", []string{"ax"}); len(got) != 0 {
		t.Fatalf("got %v", got)
	}
	// Two candidates equally similar: the later one is suggested.
	got := didYouMean("tes", []string{"test", "tesx"})
	if len(got) != 2 || got[len(got)-1] != "tesx" {
		t.Fatalf("got %v", got)
	}
}
