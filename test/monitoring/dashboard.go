package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
)

// DashboardQueries returns the PromQL expression of every query of every panel of the Grafana
// dashboard JSON at path (config/grafana/cos-externalizer.json, which hack/gen/dashboardgen writes).
func DashboardQueries(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, t.Expr)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no panel has a query", path)
	}
	return out, nil
}
