// Build recipe for kube-router, whose network policy controller enforces NetworkPolicies in the kind
// cluster of make test-e2e-sources (docs/e2e.md). Not project code.
module github.com/cos-externalizer/cos-externalizer/hack/tools/kuberouter

go 1.26.2

require github.com/cloudnativelabs/kube-router/v2 v2.11.1
