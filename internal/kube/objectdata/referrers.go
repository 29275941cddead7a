package objectdata

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
)

// RefIndex is the field index of ClusterObjectSets by the "namespace/name" of every Secret they
// reference (olmv1.ClusterObjectSet.ReferencedSecrets).
const RefIndex = "spec.phases.objects.ref"

// IndexRefs registers RefIndex with indexer (the manager's, once per manager, before its cache
// starts). systemNamespace is what an empty ref.namespace means.
func IndexRefs(ctx context.Context, indexer client.FieldIndexer, systemNamespace string) error {
	if err := indexer.IndexField(ctx, &olmv1.ClusterObjectSet{}, RefIndex, refKeys(systemNamespace)); err != nil {
		return fmt.Errorf("indexing ClusterObjectSets by referenced Secret: %w", err)
	}
	return nil
}

// refKeys is the indexer of RefIndex.
func refKeys(systemNamespace string) client.IndexerFunc {
	return func(obj client.Object) []string {
		cos, ok := obj.(*olmv1.ClusterObjectSet)
		if !ok {
			return nil
		}
		var keys []string
		for _, key := range cos.ReferencedSecrets(systemNamespace) {
			keys = append(keys, key.String())
		}
		return keys
	}
}

// Referrers lists the ClusterObjectSets that reference the Secret secret, as reader (a cache with
// RefIndex, see IndexRefs) has them. They are the cache's own objects, not copies (every caller only
// reads them, and a Secret's referrers may be many large objects): callers must not change them.
func Referrers(ctx context.Context, reader client.Reader, secret client.ObjectKey) ([]olmv1.ClusterObjectSet, error) {
	list := &olmv1.ClusterObjectSetList{}
	if err := reader.List(ctx, list, client.MatchingFields{RefIndex: secret.String()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the ClusterObjectSets that reference Secret %s: %w", secret, err)
	}
	return list.Items, nil
}
