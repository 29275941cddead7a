package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// refNameAnnotation names a manifest in a layout's index.json: skopeo's and oras's oci:DIR:REF.
	refNameAnnotation = "org.opencontainers.image.ref.name"
	// The SBOM's artifact type and the empty config of an OCI artifact manifest (image-spec 1.1).
	sbomArtifactType = "application/spdx+json"
	emptyMediaType   = "application/vnd.oci.empty.v1+json"
)

// emptyJSON is the content of the empty config descriptor.
var emptyJSON = []byte("{}")

// BuildIndex returns the multi-arch image: an OCI index of one image per GOARCH of binaries (linux
// only), in GOARCH order, with the options' annotations on the index and each manifest.
func BuildIndex(binaries map[string][]byte, o Options) (v1.ImageIndex, error) {
	arches := make([]string, 0, len(binaries))
	for a := range binaries {
		arches = append(arches, a)
	}
	sort.Strings(arches)
	var adds []mutate.IndexAddendum
	for _, arch := range arches {
		po := o
		po.Arch = arch
		img, err := Build(binaries[arch], po)
		if err != nil {
			return nil, fmt.Errorf("linux/%s: %w", arch, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch},
		}})
	}
	idx := mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), types.OCIImageIndex)
	return mutate.Annotations(idx, Labels(o)).(v1.ImageIndex), nil
}

// WriteLayout writes idx as an OCI image layout into dir (replaced whole), named ref in index.json,
// with sbom (when not nil) beside it as an OCI artifact whose subject is idx: a referrer that
// `oras cp -r` copies with the image.
func WriteLayout(dir, ref string, idx v1.ImageIndex, sbom []byte) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: ref})); err != nil {
		return err
	}
	if sbom == nil {
		return nil
	}
	subject, err := descriptorOf(idx)
	if err != nil {
		return err
	}
	manifest, desc, blobs, err := sbomArtifact(sbom, subject)
	if err != nil {
		return err
	}
	for _, b := range append(blobs, manifest) {
		if err := p.WriteBlob(hashOf(b), io.NopCloser(bytes.NewReader(b))); err != nil {
			return err
		}
	}
	return p.AppendDescriptor(desc)
}

func descriptorOf(idx v1.ImageIndex) (v1.Descriptor, error) {
	d, err := idx.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	n, err := idx.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: types.OCIImageIndex, Digest: d, Size: n}, nil
}

func hashOf(b []byte) v1.Hash {
	s := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(s[:])}
}

// sbomArtifact is the OCI artifact manifest carrying sbom with subject, its descriptor for
// index.json, and the blobs it names (the empty config and the SBOM).
func sbomArtifact(sbom []byte, subject v1.Descriptor) (manifest []byte, desc v1.Descriptor, blobs [][]byte, err error) {
	layer := v1.Descriptor{MediaType: sbomArtifactType, Digest: hashOf(sbom), Size: int64(len(sbom)),
		Annotations: map[string]string{"org.opencontainers.image.title": "sbom.spdx.json"}}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  sbomArtifactType,
		Config:        v1.Descriptor{MediaType: emptyMediaType, Digest: hashOf(emptyJSON), Size: int64(len(emptyJSON)), Data: emptyJSON},
		Layers:        []v1.Descriptor{layer},
		Subject:       &subject,
	}
	manifest, err = json.Marshal(m)
	if err != nil {
		return nil, v1.Descriptor{}, nil, err
	}
	desc = v1.Descriptor{MediaType: types.OCIManifestSchema1, ArtifactType: sbomArtifactType,
		Digest: hashOf(manifest), Size: int64(len(manifest))}
	return manifest, desc, [][]byte{emptyJSON, sbom}, nil
}
