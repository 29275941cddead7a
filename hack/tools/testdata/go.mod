// Pinned sources of the real third-party test bundles. Not project code: nothing here is built;
// `make testdata` downloads these module zips (checked against go.sum) and copies the bundles out of
// them into bin/testdata/bundles:
//   - prometheus-operator: example/prometheus-operator-crd-full/*.yaml -> prometheus-operator-crds/
//   - argo-cd: manifests/install.yaml -> argocd-install/install.yaml
// Keep one module per require line: the Makefile reads the versions from here. Do not run
// `go mod tidy` here (no package imports these modules, so it would drop them); to move a version,
// edit it and run `go mod download <module>` in this folder to refresh go.sum.
module github.com/cos-externalizer/cos-externalizer/hack/tools/testdata

go 1.26.0

require github.com/prometheus-operator/prometheus-operator v0.93.0

require github.com/argoproj/argo-cd/v3 v3.5.2
