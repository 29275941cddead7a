package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDockerfileMatches: the repository's Dockerfile builds the image this tool builds: FROM scratch
// with the files of `image rootfs`, and the same config and labels.
func TestDockerfileMatches(t *testing.T) {
	raw, err := os.ReadFile("../../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// The final stage, continuation lines joined.
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	stages := strings.Split(text, "\nFROM ")
	final := stages[len(stages)-1]
	got := map[string]string{}
	labels := map[string]string{}
	for _, line := range strings.Split(final, "\n") {
		instr, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch instr {
		case "scratch", "ENV", "WORKDIR", "USER", "ENTRYPOINT":
			got[instr] = strings.TrimSpace(rest)
		case "COPY":
			got[instr] = strings.Join(strings.Fields(rest), " ")
		case "LABEL":
			for _, m := range regexp.MustCompile(`(\S+)="([^"]*)"`).FindAllStringSubmatch(rest, -1) {
				labels[m[1]] = m[2]
			}
		}
	}
	want := map[string]string{
		"scratch":    "",
		"COPY":       "--from=builder /rootfs/ /",
		"ENV":        pathEnv,
		"WORKDIR":    "/",
		"USER":       user,
		"ENTRYPOINT": `["` + entrypoint + `"]`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("final stage (-want +got):\n%s", diff)
	}
	wantLabels := Labels(Options{Version: "$VERSION", Revision: "$REVISION", Created: time.Unix(0, 0)})
	wantLabels["org.opencontainers.image.created"] = "$CREATED"
	if diff := cmp.Diff(wantLabels, labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	builder := strings.Join(stages[:len(stages)-1], "\n")
	if !strings.Contains(builder, "go run . rootfs -binary /out/manager -output /rootfs") ||
		!strings.Contains(builder, "go build -trimpath -buildvcs=false") {
		t.Error("the builder stage does not build the manager as make image does and write its files with image rootfs")
	}
}
