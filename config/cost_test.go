package config

import (
	"strings"
	"testing"
	"time"
)

func TestTheCostModelKeepsItsDefaultsAndNamesEachBadField(t *testing.T) {
	c, err := parse(t, "costModel:\n  traffic:\n    affinity: 2m\n", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	m := c.CostModel
	if m.TrafficOf("affinity") != 2*time.Minute || m.TrafficOf("roundrobin") != time.Minute || m.EngineStartup.D() != 3*time.Minute {
		t.Errorf("cost model %+v", m)
	}
	if w := m.Words(); !strings.Contains(w, "engine start-up 3m0s per engine Pod") || !strings.Contains(w, "affinity 2m0s") {
		t.Errorf("words %q", w)
	}
	_, err = parse(t, "costModel:\n  engineStartup: 0s\n  traffic:\n    nosuchclaim: 1m\n    affinity: 0s\n", noEnv)
	for _, want := range []string{
		"costModel.engineStartup must be a positive duration",
		`costModel.traffic.nosuchclaim names "nosuchclaim", which is not one of default,`,
		"costModel.traffic.affinity must be a positive duration",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to contain %q", err, want)
		}
	}
}
