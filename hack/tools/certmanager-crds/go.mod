// Pinned source of cert-manager's CustomResourceDefinitions, which the deploy tests
// (test/integration/deploy) install to dry-run config/default on the local control plane. Not project
// code: nothing here is built; `make certmanager-crds` downloads this module zip (checked against
// go.sum) and copies its deploy/crds/*.yaml into bin/testdata/certmanager-crds. Do not run
// `go mod tidy` here (no package imports the module, so it would drop it); to move the version, edit it
// and run `go mod download github.com/cert-manager/cert-manager` in this folder to refresh go.sum.
module github.com/cos-externalizer/cos-externalizer/hack/tools/certmanager-crds

go 1.26.0

require github.com/cert-manager/cert-manager v1.21.2
