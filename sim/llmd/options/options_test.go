package options_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpustack/routing-conformance/sim/llmd/options"
)

func parse(t *testing.T, args ...string) (*options.Options, error, string) {
	t.Helper()
	var out bytes.Buffer
	o := options.New()
	fs := o.FlagSet("epp", &out)
	err := fs.Parse(args)
	return o, err, out.String()
}

func TestOperatorArgvParsesToTheEPPDefaultsPlusOverrides(t *testing.T) {
	o, err, _ := parse(t, "--endpoint-selector=app=x,!router", "--endpoint-target-ports=8000,8000,8001",
		"--config-file=/config/epp.yaml", "--secure-serving=false", "--grpc-health-port=9003", "--metrics-endpoint-auth=false")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.SecureServing || o.MetricsEndpointAuth || o.GRPCPort != 9002 || o.MetricsPort != 9090 || o.LogVerbosity != 2 ||
		o.RefreshMetricsInterval.Milliseconds() != 50 || o.MetricsStalenessThreshold.Seconds() != 2 || !o.Tracing || !o.EnablePprof {
		t.Fatalf("%+v", o)
	}
	if len(o.EndpointTargetPorts) != 2 {
		t.Fatalf("duplicate ports removed: %v", o.EndpointTargetPorts)
	}
	b, _ := json.Marshal(o.Processed())
	for _, want := range []string{`"secure-serving":false`, `"drain-timeout":30000000000`, `"endpoint-target-ports":{}`, `"zap-encoder":{}`, `"v":2`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("Flags processed map lacks %s: %s", want, b)
		}
	}
}

func TestValidateRejectsAsTheEPPDoes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{}, "either pool-name or endpoint-selector must be set"},
		{[]string{"--pool-name=p", "--endpoint-selector=a=b", "--endpoint-target-ports=1"}, "either pool-name or endpoint-selector must be set"},
		{[]string{"--endpoint-selector=a=b"}, `flag "endpoint-target-ports" should have length from 1 to 8`},
		{[]string{"--endpoint-selector=a=b", "--endpoint-target-ports=1,2,3,4,5,6,7,8,9"}, `flag "endpoint-target-ports" should have length from 1 to 8`},
		{[]string{"--pool-name=p", "--config-file=f", "--config-text=t"}, `both the "config-file" and "config-text" flags cannot be set at the same time`},
		{[]string{"--pool-name=p", "--lora-info-metric=x"}, `flag "lora-info-metric" is deprecated and cannot be used; configure metrics via engineConfigs in EndpointPickerConfig instead`},
	} {
		o, err, _ := parse(t, tc.args...)
		if err == nil {
			err = o.Complete()
		}
		if err == nil {
			err = o.Validate()
		}
		if err == nil || err.Error() != tc.err {
			t.Errorf("%v: got %v, want %q", tc.args, err, tc.err)
		}
	}
}

func TestPflagErrorsAndUsage(t *testing.T) {
	_, err, _ := parse(t, "--nope")
	if err == nil || err.Error() != "unknown flag: --nope" {
		t.Fatalf("%v", err)
	}
	_, err, _ = parse(t, "--grpc-port=x")
	if err == nil || !strings.HasPrefix(err.Error(), `invalid argument "x" for "--grpc-port" flag`) {
		t.Fatalf("%v", err)
	}
	_, _, out := parse(t, "--pool-name=p", "--cache-info-metric=x")
	if out != "Flag --cache-info-metric has been deprecated, use engineConfigs in EndpointPickerConfig instead\n" {
		t.Fatalf("pflag's deprecation notice: %q", out)
	}
	o := options.New()
	u := options.Usage(o.FlagSet("epp", &bytes.Buffer{}))
	if !strings.HasPrefix(u, "Usage of epp:\n") || !strings.Contains(u, "--endpoint-selector string") || strings.Contains(u, "total-queued-requests-metric") {
		t.Fatalf("usage (deprecated flags hidden):\n%s", u)
	}
}
