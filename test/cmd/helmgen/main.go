// Command helmgen writes the Helm chart charts/cos-externalizer from the kustomize overlays of
// config/, so that Helm and kustomize never drift apart (`make chart`; `make verify` fails when the
// committed chart differs):
//
//	helmgen -kubectl bin/kubectl -config config -out charts/cos-externalizer -version 0.1.0
//
// It renders each mode's overlay (Modes) and config/prometheus with `kubectl kustomize`, keeps an
// object that every mode renders alike once, guards the others with the modes that render them, and
// substitutes values at known paths (Generate). Objects other helpers add to config/ come through
// as they are.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/cos-externalizer/cos-externalizer/test/manifests"
)

func main() {
	kubectl := flag.String("kubectl", "bin/kubectl", "kubectl with kustomize")
	config := flag.String("config", "config", "the kustomize folder holding the overlays")
	out := flag.String("out", "charts/cos-externalizer", "the chart's folder, replaced whole")
	version := flag.String("version", "0.1.0", "the chart's version")
	flag.Parse()
	if err := run(*kubectl, *config, *out, *version); err != nil {
		fmt.Fprintln(os.Stderr, "helmgen:", err)
		os.Exit(1)
	}
}

func run(kubectl, config, out, version string) error {
	in := Input{Version: version, Namespace: SystemNamespace}
	render := func(overlay string) ([]map[string]any, error) {
		cmd := exec.Command(kubectl, "kustomize", filepath.Join(config, overlay))
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("kubectl kustomize %s: %w", overlay, err)
		}
		objs, err := manifests.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("overlay %s: %w", overlay, err)
		}
		var maps []map[string]any
		for _, u := range objs {
			maps = append(maps, u.Object)
		}
		return maps, nil
	}
	for _, m := range Modes {
		objs, err := render(m.Overlay)
		if err != nil {
			return err
		}
		in.Modes = append(in.Modes, ModeObjects{Mode: m.Name, Objects: objs})
	}
	monitoring, err := render(MonitoringOverlay)
	if err != nil {
		return err
	}
	in.Monitoring = monitoring
	files, err := Generate(in)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	for name, b := range files {
		p := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil { //nolint:gosec // a chart is read by everyone
			return err
		}
	}
	return nil
}
