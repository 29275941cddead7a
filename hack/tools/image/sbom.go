package main

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1"
)

// SPDX 2.3 JSON (https://spdx.github.io/spdx-spec/v2.3/), the fields this SBOM uses.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	DocumentDescribes []string           `json:"documentDescribes"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name                  string            `json:"name"`
	SPDXID                string            `json:"SPDXID"`
	VersionInfo           string            `json:"versionInfo,omitempty"`
	Supplier              string            `json:"supplier,omitempty"`
	DownloadLocation      string            `json:"downloadLocation"`
	FilesAnalyzed         bool              `json:"filesAnalyzed"`
	LicenseConcluded      string            `json:"licenseConcluded"`
	LicenseDeclared       string            `json:"licenseDeclared"`
	CopyrightText         string            `json:"copyrightText"`
	PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
	Checksums             []spdxChecksum    `json:"checksums,omitempty"`
	ExternalRefs          []spdxExternalRef `json:"externalRefs,omitempty"`
	Comment               string            `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

const noAssertion = "NOASSERTION"

var notIDChars = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// SBOM is the SPDX 2.3 JSON document of the multi-arch image index (digest) published as repository:
// the image, the manager in it, and the Go modules and standard library the manager's binaries are
// built from, read from their Go build info (debug/buildinfo). Every binary must be built from the
// same modules and Go version. The output is a function of its inputs: no clock, no random ID.
func SBOM(binaries map[string][]byte, o Options, repository string, digest v1.Hash) ([]byte, error) {
	var info *debug.BuildInfo
	arches := make([]string, 0, len(binaries))
	for a := range binaries {
		arches = append(arches, a)
	}
	sort.Strings(arches)
	for _, a := range arches {
		bi, err := buildinfo.Read(bytes.NewReader(binaries[a]))
		if err != nil {
			return nil, fmt.Errorf("the linux/%s binary's build info: %w", a, err)
		}
		if info == nil {
			info = bi
		} else if got, want := moduleList(bi), moduleList(info); bi.GoVersion != info.GoVersion || got != want {
			return nil, fmt.Errorf("the linux/%s binary is built from other modules or another Go than linux/%s's", a, arches[0])
		}
	}
	if info == nil {
		return nil, fmt.Errorf("no binary")
	}

	imageID := "SPDXRef-Package-image"
	mainID := "SPDXRef-Package-go-module-" + notIDChars.ReplaceAllString(info.Main.Path, "-")
	goID := "SPDXRef-Package-go-stdlib"
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        title + "-" + o.Version,
		// Unique per release and content, yet reproducible: the version and the index digest.
		DocumentNamespace: source + "/spdx/" + url.PathEscape(o.Version) + "/" + digest.Hex,
		CreationInfo: spdxCreationInfo{
			Created:  o.Created.UTC().Format(time.RFC3339),
			Creators: []string{"Organization: cos-externalizer", "Tool: cos-externalizer-hack-tools-image"},
		},
		DocumentDescribes: []string{imageID},
	}
	platforms := make([]string, len(arches))
	for i, a := range arches {
		platforms[i] = "linux/" + a
	}
	doc.Packages = append(doc.Packages,
		spdxPackage{
			Name: title, SPDXID: imageID, VersionInfo: o.Version, DownloadLocation: noAssertion,
			LicenseConcluded: noAssertion, LicenseDeclared: licenses, CopyrightText: noAssertion,
			PrimaryPackagePurpose: "CONTAINER",
			Checksums:             []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: digest.Hex}},
			ExternalRefs: []spdxExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
				ReferenceLocator: "pkg:oci/" + title + "@" + digest.Algorithm + "%3A" + digest.Hex +
					"?repository_url=" + url.QueryEscape(repository) + "&tag=" + url.QueryEscape(o.Version)}},
			Comment: "OCI image index of " + strings.Join(platforms, ", ") + ", revision " + o.Revision,
		},
		spdxPackage{
			Name: info.Main.Path, SPDXID: mainID, VersionInfo: o.Version, DownloadLocation: "git+" + source + ".git",
			LicenseConcluded: noAssertion, LicenseDeclared: licenses, CopyrightText: noAssertion,
			PrimaryPackagePurpose: "APPLICATION",
			ExternalRefs:          []spdxExternalRef{goPURL(info.Main.Path, o.Version)},
			Comment:               "the manager, /manager in the image (package " + info.Path + ")",
		},
		spdxPackage{
			Name: "stdlib", SPDXID: goID, VersionInfo: info.GoVersion, DownloadLocation: noAssertion,
			LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
			PrimaryPackagePurpose: "LIBRARY",
			ExternalRefs:          []spdxExternalRef{goPURL("stdlib", info.GoVersion)},
		},
	)
	doc.Relationships = append(doc.Relationships,
		spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", imageID},
		spdxRelationship{imageID, "CONTAINS", mainID},
		spdxRelationship{mainID, "DEPENDS_ON", goID},
	)
	for i, m := range info.Deps {
		replacedBy := ""
		switch {
		case m.Replace != nil && m.Replace.Version != "" && m.Replace.Version != "(devel)":
			m = m.Replace
		case m.Replace != nil: // a folder: the module as required, said so
			replacedBy = "replaced by the folder " + m.Replace.Path
		}
		id := fmt.Sprintf("SPDXRef-Package-go-module-%d-%s", i, notIDChars.ReplaceAllString(m.Path, "-"))
		p := spdxPackage{
			Name: m.Path, SPDXID: id, VersionInfo: m.Version, DownloadLocation: noAssertion,
			LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
			PrimaryPackagePurpose: "LIBRARY",
			ExternalRefs:          []spdxExternalRef{goPURL(m.Path, m.Version)},
		}
		if m.Sum != "" {
			p.Comment = "go.sum " + m.Sum
		}
		if replacedBy != "" {
			p.Comment = replacedBy
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{mainID, "DEPENDS_ON", id})
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// moduleList is the modules of a build info, one path@version a line, for comparing two binaries.
func moduleList(bi *debug.BuildInfo) string {
	var b strings.Builder
	for _, m := range bi.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		fmt.Fprintf(&b, "%s@%s\n", m.Path, m.Version)
	}
	return b.String()
}

// goPURL is the package URL of a Go module (https://github.com/package-url/purl-spec): its path
// lower-cased with the last element as the name.
func goPURL(path, version string) spdxExternalRef {
	ns, name := "", path
	if i := strings.LastIndex(path, "/"); i >= 0 {
		ns, name = path[:i]+"/", path[i+1:]
	}
	return spdxExternalRef{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
		ReferenceLocator: "pkg:golang/" + strings.ToLower(ns+name) + "@" + url.PathEscape(version)}
}
