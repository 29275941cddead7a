package monitoring

import "testing"

// TestDashboardQueries: the committed dashboard's queries are read, each naming a metric.
func TestDashboardQueries(t *testing.T) {
	queries, err := DashboardQueries("../../config/grafana/cos-externalizer.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		if names, err := MetricNames(q); err != nil || len(names) == 0 {
			t.Errorf("query %q names %v (%v)", q, names, err)
		}
	}
}
