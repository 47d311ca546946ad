package argparse

import (
	"errors"
	"strings"
	"testing"
)

func parser() *Parser {
	return &Parser{
		Prog: "launch_server.py",
		Options: []*Option{
			{Flags: []string{"--model-path", "--model"}, Required: true},
			{Flags: []string{"--port"}, Check: Int},
			{Flags: []string{"--tp-size", "--tensor-parallel-size", "--tp"}, Check: Int},
			{Flags: []string{"--enable-metrics"}, Action: StoreTrue},
			{Flags: []string{"--enable-prefix-caching"}, Action: BoolOptional},
			{Flags: []string{"--served-model-name"}, Nargs: OneOrMore},
			{Flags: []string{"--disaggregation-mode"}, Choices: []string{"null", "prefill", "decode"}},
			{Flags: []string{"--seed"}, Check: Int},
			{Flags: []string{"--middleware"}, Action: Append},
			{Flags: []string{"--enable-cache-report"}, Action: StoreTrue},
		},
	}
}

func parseErr(t *testing.T, args ...string) *Error {
	t.Helper()
	_, err := parser().Parse(args)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Parse(%q) err = %v, want *Error", args, err)
	}
	return e
}

func TestBothValueFormsAndAliases(t *testing.T) {
	r, err := parser().Parse([]string{"--model-path", "m", "--port=8000", "--tp", "2", "--enable-metrics", "--served-model-name", "a", "b", "--seed", "-1", "--no-enable-prefix-caching", "--middleware", "x", "--middleware=y"})
	if err != nil {
		t.Fatal(err)
	}
	if r.String("model_path", "") != "m" || r.IntValue("port", 0) != 8000 || r.IntValue("tp_size", 1) != 2 {
		t.Fatalf("values: %+v", r)
	}
	if !r.Bool("enable_metrics", false) || r.Bool("enable_prefix_caching", true) || r.Bool("enable_cache_report", false) {
		t.Fatalf("bools: %+v", r.bools)
	}
	if got := r.Strings("served_model_name"); len(got) != 2 || got[1] != "b" {
		t.Fatalf("served names %v", got)
	}
	if r.IntValue("seed", 0) != -1 {
		t.Fatal("negative number not taken as a value")
	}
	if got := r.Strings("middleware"); len(got) != 2 {
		t.Fatalf("append %v", got)
	}
}

func TestUnknownFlagIsUnrecognizedArgumentsWithUsage(t *testing.T) {
	e := parseErr(t, "--model-path", "m", "--bogus", "1", "--port", "1")
	if e.Msg != "unrecognized arguments: --bogus 1" {
		t.Fatalf("msg %q", e.Msg)
	}
	text := e.Text()
	if !strings.HasPrefix(text, "usage: launch_server.py [-h] --model-path MODEL_PATH") || !strings.HasSuffix(text, "launch_server.py: error: unrecognized arguments: --bogus 1\n") {
		t.Fatalf("text:\n%s", text)
	}
	// argparse wraps at 78 columns and aligns continuation lines after "usage: <prog> ".
	lines := strings.Split(strings.TrimSuffix(e.Usage, "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("long usage not wrapped: %q", e.Usage)
	}
	for _, line := range lines[1:] {
		if !strings.HasPrefix(line, strings.Repeat(" ", len("usage: launch_server.py "))+"[") {
			t.Fatalf("continuation line not aligned: %q", line)
		}
	}
}

func TestArgparseMessages(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model-path", "m", "--port"}, "argument --port: expected one argument"},
		{[]string{"--model-path", "m", "--port", "x"}, "argument --port: invalid int value: 'x'"},
		{[]string{"--port", "1"}, "the following arguments are required: --model-path/--model"},
		{[]string{"--model-path", "m", "--disaggregation-mode", "both"}, "argument --disaggregation-mode: invalid choice: 'both' (choose from 'null', 'prefill', 'decode')"},
		{[]string{"--model-path", "m", "--enable-metrics=1"}, "argument --enable-metrics: ignored explicit argument '1'"},
		{[]string{"--model-path", "m", "--enable"}, "ambiguous option: --enable could match --enable-cache-report, --enable-metrics, --enable-prefix-caching"},
		{[]string{"--model-path", "m", "--served-model-name"}, "argument --served-model-name: expected at least one argument"},
	} {
		if got := parseErr(t, tc.args...).Msg; got != tc.want {
			t.Errorf("Parse(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestUniquePrefixAbbreviates(t *testing.T) {
	r, err := parser().Parse([]string{"--model-p", "m", "--disagg", "prefill"})
	if err != nil {
		t.Fatal(err)
	}
	if r.String("model_path", "") != "m" || r.String("disaggregation_mode", "") != "prefill" {
		t.Fatal("abbreviation not resolved")
	}
}

func TestPositionalsAndCustomUsage(t *testing.T) {
	p := &Parser{Prog: "vllm serve", Usage: "vllm serve [model_tag] [options]",
		Positionals: []*Positional{{Name: "model_tag", Nargs: Optional}},
		Options:     []*Option{{Flags: []string{"--port"}, Check: Int}}}
	r, extras, err := p.ParseKnown([]string{"Qwen/Qwen3-0.6B", "--port", "8000", "stray", "--nope"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Positional("model_tag", "") != "Qwen/Qwen3-0.6B" {
		t.Fatal("positional")
	}
	if strings.Join(extras, " ") != "--nope stray" {
		t.Fatalf("extras %q", extras)
	}
	if u := p.FormatUsage(); u != "usage: vllm serve [model_tag] [options]\n" {
		t.Fatalf("usage %q", u)
	}
}

func TestHelpIsNotAnError(t *testing.T) {
	_, err := parser().Parse([]string{"--help"})
	var h *Help
	if !errors.As(err, &h) || !strings.Contains(h.Text, "--model-path") {
		t.Fatalf("err = %v", err)
	}
}

func TestHumanReadableInt(t *testing.T) {
	for in, want := range map[string]int{"1k": 1000, "1K": 1024, "25.6k": 25600, "32768": 32768, "2M": 2 << 20} {
		if got, err := HumanInt(in); err != nil || got != want {
			t.Errorf("HumanInt(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := HumanInt("1.5K"); err == nil {
		t.Error("decimal with binary suffix accepted")
	}
}
