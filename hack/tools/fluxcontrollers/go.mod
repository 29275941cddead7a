// Build recipe for Flux's source-controller and kustomize-controller at pinned releases (Flux's
// own go.mod replaces repeated, as a dependency's are not applied). Not project code: make
// flux-controllers builds them into bin/flux/ for the Flux end-to-end test (make test-gitops). These
// releases need Go 1.27: run the go command here with GOTOOLCHAIN=go1.27.3 (the Makefile does).
module github.com/cos-externalizer/cos-externalizer/hack/tools/fluxcontrollers

go 1.27.0

require (
	github.com/fluxcd/kustomize-controller v1.10.1
	github.com/fluxcd/kustomize-controller/api v1.10.1
	github.com/fluxcd/source-controller v1.10.1
	github.com/fluxcd/source-controller/api v1.10.1
)

replace github.com/opencontainers/go-digest => github.com/opencontainers/go-digest v1.0.1-0.20220411205349-bde1400a84be

replace (
	sigs.k8s.io/kustomize/api => sigs.k8s.io/kustomize/api v0.21.1
	sigs.k8s.io/kustomize/kyaml => sigs.k8s.io/kustomize/kyaml v0.21.1
)

replace gopkg.in/yaml.v3 => gopkg.in/yaml.v3 v3.0.1
