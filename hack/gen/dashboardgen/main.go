// Command dashboardgen writes the Grafana dashboard of config/grafana from its spec (Dashboard, in
// dashboard.go): `make dashboard`, checked by `make verify`.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("o", "config/grafana/cos-externalizer.json", "File to write.")
	flag.Parse()
	b, err := DashboardJSON(Dashboard)
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboardgen:", err)
		os.Exit(1)
	}
}
