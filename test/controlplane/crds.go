package controlplane

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/cos-externalizer/cos-externalizer/internal/manifests"
)

// CRDDir returns the repository's generated CRD folder.
func CRDDir() (string, error) {
	return repoPath("config", "crd", "bases")
}

// InstallCRDs creates or updates every CustomResourceDefinition in the YAML files of dir and waits
// until each is Established.
func InstallCRDs(ctx context.Context, cfg *rest.Config, dir string) ([]string, error) {
	crds, err := ReadCRDs(dir)
	if err != nil {
		return nil, err
	}
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	var names []string
	for _, crd := range crds {
		existing, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, crd, metav1.CreateOptions{})
		case err == nil:
			crd.ResourceVersion = existing.ResourceVersion
			_, err = api.Update(ctx, crd, metav1.UpdateOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := api.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // not yet: poll again
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return nil, fmt.Errorf("waiting for CRD %s to be Established: %w", name, err)
		}
	}
	// Established is not yet served: discovery lags a moment behind, and clients that look the
	// resource up (kubectl, REST mappers) fail until it catches up.
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := crd.Spec.Group + "/" + v.Name
			err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				list, err := cs.Discovery().ServerResourcesForGroupVersion(gv)
				if err != nil {
					return false, nil //nolint:nilerr // not yet: poll again
				}
				for _, r := range list.APIResources {
					if r.Name == crd.Spec.Names.Plural {
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				return nil, fmt.Errorf("waiting for %s %s to be served: %w", gv, crd.Spec.Names.Plural, err)
			}
		}
	}
	return names, nil
}

// ReadCRDs parses every CustomResourceDefinition in the manifest files of dir.
func ReadCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	objs, err := manifests.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", o.GetName(), err)
		}
		out = append(out, crd)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition in %s", dir)
	}
	return out, nil
}
