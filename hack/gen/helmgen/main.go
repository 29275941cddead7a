// Command helmgen writes the Helm chart charts/cos-externalizer from the kustomize overlays of
// config/, so that Helm and kustomize never drift apart (`make chart`; `make verify` fails when the
// committed chart differs):
//
//	helmgen -kubectl bin/kubectl -config config -out charts/cos-externalizer -version 0.1.0 -registry ghcr.io/cos-externalizer/cos-externalizer
//
// It renders each mode's overlay (Modes) and monitoring overlay (MonitoringOverlay) with `kubectl kustomize`, keeps an
// object that every mode renders alike once, guards the others with the modes that render them, and
// substitutes values at known paths (Generate). Objects other helpers add to config/ come through
// as they are.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/cos-externalizer/cos-externalizer/internal/manifests"
)

func main() {
	kubectl := flag.String("kubectl", "bin/kubectl", "kubectl with kustomize")
	config := flag.String("config", "config", "the kustomize folder holding the overlays")
	out := flag.String("out", "charts/cos-externalizer", "the chart's folder, replaced whole")
	version := flag.String("version", "0.1.0", "the chart's version")
	registry := flag.String("registry", "", "the default image.repository (empty: the overlays' image)")
	flag.Parse()
	if err := run(*kubectl, *config, *out, *version, *registry); err != nil {
		fmt.Fprintln(os.Stderr, "helmgen:", err)
		os.Exit(1)
	}
}

// monitoringOverlay returns the folder (relative to config, or absolute) that renders the
// monitoring objects beside an install overlay: config/prometheus/<overlay> when there is one (a
// Component of it is put over config/prometheus in a throwaway kustomization, which cleanup
// removes), else config/prometheus.
func monitoringOverlay(config, overlay string) (dir string, cleanup func(), err error) {
	cleanup = func() {}
	own := filepath.Join(MonitoringOverlay, overlay)
	b, err := os.ReadFile(filepath.Join(config, own, "kustomization.yaml"))
	if errors.Is(err, fs.ErrNotExist) {
		return MonitoringOverlay, cleanup, nil
	}
	if err != nil {
		return "", cleanup, err
	}
	var k struct{ Kind string }
	if err := yaml.Unmarshal(b, &k); err != nil {
		return "", cleanup, fmt.Errorf("%s: %w", own, err)
	}
	if k.Kind != "Component" {
		return own, cleanup, nil
	}
	tmp, err := os.MkdirTemp("", "helmgen-")
	if err != nil {
		return "", cleanup, err
	}
	cleanup = func() { _ = os.RemoveAll(tmp) }
	rel := func(p string) (string, error) {
		abs, err := filepath.Abs(filepath.Join(config, p))
		if err != nil {
			return "", err
		}
		return filepath.Rel(tmp, abs)
	}
	base, err := rel(MonitoringOverlay)
	if err != nil {
		return "", cleanup, err
	}
	component, err := rel(own)
	if err != nil {
		return "", cleanup, err
	}
	k8s := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\ncomponents:\n- %s\n", base, component)
	if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), []byte(k8s), 0o600); err != nil {
		return "", cleanup, err
	}
	return tmp, cleanup, nil
}

func run(kubectl, config, out, version, registry string) error {
	in := Input{Version: version, Namespace: SystemNamespace, Registry: registry}
	render := func(overlay string) ([]map[string]any, error) {
		dir := overlay
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(config, overlay)
		}
		cmd := exec.Command(kubectl, "kustomize", dir)
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
		monitoring, cleanup, err := monitoringOverlay(config, m.Overlay)
		if err != nil {
			return err
		}
		mon, err := render(monitoring)
		cleanup()
		if err != nil {
			return err
		}
		in.Modes = append(in.Modes, ModeObjects{Mode: m.Name, Objects: objs, Monitoring: mon})
	}
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
