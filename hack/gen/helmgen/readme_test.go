package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValueRows(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want []valueRow
	}{
		"scalars": {"# The replicas.\nreplicas: 2\n\n# The mode.\nmode: a\n", []valueRow{
			{"replicas", "2", "The replicas."}, {"mode", "a", "The mode."}}},
		"shared comment": {"# Labels and annotations.\npodLabels: {}\npodAnnotations: {}\n\nlone: 1\n", []valueRow{
			{"podLabels", "{}", "Labels and annotations."}, {"podAnnotations", "{}", "Labels and annotations."}, {"lone", "1", ""}}},
		"block without comments is one row": {"# Limits.\nresources:\n  limits:\n    memory: 1Gi\n", []valueRow{
			{"resources", `{"limits":{"memory":"1Gi"}}`, "Limits."}}},
		"list block": {"# Taints.\ntolerations:\n- key: a\n  operator: Exists\nnext: x\n", []valueRow{
			{"tolerations", `[{"key":"a","operator":"Exists"}]`, "Taints."}, {"next", "x", "Taints."}}},
		"section": {"# The image.\nimage:\n  repository: r\n  # Its policy.\n  pullPolicy: \"\"\n  nested:\n    # Deep.\n    on: true\n", []valueRow{
			{"image.repository", "r", "The image."}, {"image.pullPolicy", `""`, "Its policy."}, {"image.nested.on", "true", "Deep."}}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := valueRows([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(valueRow{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := valueRows([]byte("a: [\n")); err == nil {
		t.Error("invalid YAML: no error")
	}
}

func FuzzValueRows(f *testing.F) {
	for _, s := range []string{"# c\na: 1\n", "a:\n  # c\n  b: 2\n", "a:\n- 1\n", "a:\n  b:\n    c: {}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		rows, err := valueRows([]byte(in))
		if err != nil {
			return
		}
		// The table has a line per row, whatever the keys, values and comments hold.
		readme, err := chartReadme([]byte(in))
		if err != nil {
			t.Fatalf("%q: rows but no README: %v", in, err)
		}
		_, table, _ := strings.Cut(string(readme), "|---|---|---|\n")
		if n := strings.Count(table, "\n"); n != len(rows) {
			t.Errorf("%q: %d rows make %d lines:\n%s", in, len(rows), n, table)
		}
	})
}
