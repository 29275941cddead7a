package argocd_test

import (
	_ "github.com/argoproj/argo-cd/gitops-engine/v3/pkg/health"
	_ "github.com/argoproj/argo-cd/gitops-engine/v3/pkg/sync"
	_ "github.com/argoproj/argo-cd/v3/util/lua"
	_ "github.com/argoproj/argo-cd/v3/util/settings"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "sigs.k8s.io/yaml"
)
