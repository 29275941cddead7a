package app

import (
	"errors"
	"flag"

	"github.com/cos-externalizer/cos-externalizer/webhook/unreferenced"
)

// unreferencedOptions are the flags of the bound on the object-data Secrets that no ClusterObjectSet
// references or owns (unreferenced.Bound).
type unreferencedOptions struct {
	maxBytes   int64
	maxSecrets int
}

func (o *unreferencedOptions) bind(fs *flag.FlagSet) {
	fs.Int64Var(&o.maxBytes, "max-unreferenced-bytes", unreferenced.DefaultMaxBytes, "Largest total of bytes of data of the object-data Secrets in --system-namespace that no ClusterObjectSet references or owns, whoever wrote them (counted from the cluster, the same on every replica and after a restart), with those this replica's writes in flight may create; past it, admissions that would create more are refused at once with 429 (retryable) and write nothing.")
	fs.IntVar(&o.maxSecrets, "max-unreferenced-secrets", unreferenced.DefaultMaxSecrets, "Largest number of object-data Secrets in --system-namespace that no ClusterObjectSet references or owns, whoever wrote them (counted from the cluster, the same on every replica and after a restart), with those this replica's writes in flight may create; past it, admissions that would create more are refused at once with 429 (retryable) and write nothing.")
}

func (o *unreferencedOptions) validate() error {
	return errors.Join(positive("--max-unreferenced-bytes", o.maxBytes), positive("--max-unreferenced-secrets", o.maxSecrets))
}

// ledger is the bound the webhooks apply: one per manager.
func (o *unreferencedOptions) ledger() *unreferenced.Bound {
	return &unreferenced.Bound{MaxBytes: o.maxBytes, MaxSecrets: o.maxSecrets}
}
