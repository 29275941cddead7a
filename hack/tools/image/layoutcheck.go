package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// CheckLayout checks the OCI image layout at dir as a release ships it: index.json names ref, an
// OCI index with the release's annotations (version and revision, when not empty) holding one image
// per linux arch of arches, each passing checkImage; and an SBOM referrer of that index (SPDX 2.3
// describing it), byte for byte the file sbomFile when that is not empty. It returns a report.
func CheckLayout(dir, ref, version, revision, sbomFile string, arches []string) (string, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return "", fmt.Errorf("%s is no OCI image layout: %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return "", err
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return "", err
	}
	var idxDesc, sbomDesc *v1.Descriptor
	for i, d := range tm.Manifests {
		switch {
		case d.Annotations[refNameAnnotation] == ref:
			idxDesc = &tm.Manifests[i]
		case d.ArtifactType == sbomArtifactType:
			sbomDesc = &tm.Manifests[i]
		}
	}
	if idxDesc == nil {
		return "", fmt.Errorf("%s: index.json names no %s", dir, ref)
	}
	var problems []string
	if idxDesc.MediaType != types.OCIImageIndex {
		problems = append(problems, fmt.Sprintf("%s is a %s, want an OCI image index", ref, idxDesc.MediaType))
	}
	idx, err := top.ImageIndex(idxDesc.Digest)
	if err != nil {
		return "", err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return "", err
	}
	if im.MediaType != types.OCIImageIndex {
		problems = append(problems, fmt.Sprintf("the index's media type is %s", im.MediaType))
	}
	var report strings.Builder
	fmt.Fprintf(&report, "layout %s, %s: OCI image index %s\n", dir, ref, idxDesc.Digest)
	var platforms []string
	var indexWant map[string]string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			problems = append(problems, fmt.Sprintf("manifest %s has no platform", d.Digest))
			continue
		}
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		if d.MediaType != types.OCIManifestSchema1 {
			problems = append(problems, fmt.Sprintf("%s is a %s, want an OCI image manifest", d.Platform, d.MediaType))
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return "", err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return "", err
		}
		if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture {
			problems = append(problems, fmt.Sprintf("the %s image's config says %s/%s", d.Platform, cf.OS, cf.Architecture))
		}
		r, ps, err := checkImage(img, version, revision, false)
		if err != nil {
			return "", fmt.Errorf("%s: %w", d.Platform, err)
		}
		for _, p := range ps {
			problems = append(problems, d.Platform.String()+": "+p)
		}
		fmt.Fprintf(&report, "%s %s:\n%s", d.Platform, d.Digest, r)
		if indexWant == nil { // the index carries its images' labels
			indexWant = Labels(Options{Version: cf.Config.Labels["org.opencontainers.image.version"],
				Revision: cf.Config.Labels["org.opencontainers.image.revision"], Created: cf.Created.Time})
			problems = append(problems, compareLabels("index annotation", im.Annotations, indexWant)...)
		}
	}
	wantPlatforms := make([]string, len(arches))
	for i, a := range arches {
		wantPlatforms[i] = "linux/" + a
	}
	if !slices.Equal(platforms, wantPlatforms) {
		problems = append(problems, fmt.Sprintf("the index holds %v, want %v", platforms, wantPlatforms))
	}

	if sbomDesc == nil {
		problems = append(problems, "no SBOM referrer in index.json")
	} else {
		r, ps, err := checkSBOM(p, *sbomDesc, *idxDesc, sbomFile)
		if err != nil {
			return "", err
		}
		problems = append(problems, ps...)
		report.WriteString(r)
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("%s: %s", dir, strings.Join(problems, "; "))
	}
	return report.String(), nil
}

// checkSBOM checks the SBOM artifact desc: its subject is the index, its one layer an SPDX 2.3
// document describing the index by digest, equal to sbomFile when not empty.
func checkSBOM(p layout.Path, desc, subject v1.Descriptor, sbomFile string) (report string, problems []string, err error) {
	raw, err := readBlob(p, desc.Digest)
	if err != nil {
		return "", nil, err
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", nil, fmt.Errorf("the SBOM manifest: %w", err)
	}
	if m.Subject == nil || m.Subject.Digest != subject.Digest {
		problems = append(problems, fmt.Sprintf("the SBOM's subject is %v, want the index %s", m.Subject, subject.Digest))
	}
	if m.ArtifactType != sbomArtifactType || len(m.Layers) != 1 || m.Layers[0].MediaType != sbomArtifactType {
		return "", append(problems, "the SBOM manifest is not one "+sbomArtifactType+" layer"), nil
	}
	if _, err := readBlob(p, m.Config.Digest); err != nil {
		problems = append(problems, "the SBOM manifest's config blob: "+err.Error())
	}
	sbom, err := readBlob(p, m.Layers[0].Digest)
	if err != nil {
		return "", nil, err
	}
	var doc spdxDocument
	if err := json.Unmarshal(sbom, &doc); err != nil {
		return "", nil, fmt.Errorf("the SBOM is not JSON: %w", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || len(doc.DocumentDescribes) != 1 {
		problems = append(problems, fmt.Sprintf("the SBOM is %q describing %v, want SPDX-2.3 describing the image", doc.SPDXVersion, doc.DocumentDescribes))
	}
	var described *spdxPackage
	modules := 0
	for i, pkg := range doc.Packages {
		if len(doc.DocumentDescribes) > 0 && pkg.SPDXID == doc.DocumentDescribes[0] {
			described = &doc.Packages[i]
		}
		if pkg.PrimaryPackagePurpose == "LIBRARY" {
			modules++
		}
	}
	if described == nil || len(described.Checksums) != 1 || described.Checksums[0].ChecksumValue != subject.Digest.Hex {
		problems = append(problems, "the SBOM does not describe the index by its digest")
	}
	if sbomFile != "" {
		if f, err := os.ReadFile(sbomFile); err != nil || string(f) != string(sbom) {
			problems = append(problems, fmt.Sprintf("%s differs from the SBOM in the layout (%v)", sbomFile, err))
		}
	}
	return fmt.Sprintf("SBOM %s: SPDX 2.3, %d packages (%d libraries: Go modules and stdlib), subject the index\n",
		desc.Digest, len(doc.Packages), modules), problems, nil
}

// readBlob reads a blob of the layout, checking its digest.
func readBlob(p layout.Path, h v1.Hash) ([]byte, error) {
	f, err := os.Open(filepath.Join(string(p), "blobs", h.Algorithm, h.Hex))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	if got := hashOf(b); got != h {
		return nil, fmt.Errorf("blob %s holds content of digest %s", h, got)
	}
	return b, nil
}
