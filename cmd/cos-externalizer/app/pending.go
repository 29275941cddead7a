package app

import (
	"errors"
	"flag"

	"github.com/cos-externalizer/cos-externalizer/webhook"
)

// unreferencedOptions are the flags of the bound on the object-data Secrets that no ClusterObjectSet
// references or owns (webhook.Unreferenced).
type unreferencedOptions struct {
	maxBytes   int64
	maxSecrets int
}

func (o *unreferencedOptions) bind(fs *flag.FlagSet) {
	fs.Int64Var(&o.maxBytes, "max-unreferenced-bytes", webhook.DefaultMaxUnreferencedBytes, "Largest total of bytes of data of the object-data Secrets in --system-namespace that no ClusterObjectSet references or owns, whoever wrote them (counted from the cluster, the same on every replica and after a restart), with those this replica's writes in flight may create; past it, admissions that would create more are refused at once with 429 (retryable) and write nothing.")
	fs.IntVar(&o.maxSecrets, "max-unreferenced-secrets", webhook.DefaultMaxUnreferencedSecrets, "Largest number of object-data Secrets in --system-namespace that no ClusterObjectSet references or owns, whoever wrote them (counted from the cluster, the same on every replica and after a restart), with those this replica's writes in flight may create; past it, admissions that would create more are refused at once with 429 (retryable) and write nothing.")
}

func (o *unreferencedOptions) validate() error {
	return errors.Join(positive("--max-unreferenced-bytes", o.maxBytes), positive("--max-unreferenced-secrets", o.maxSecrets))
}

// ledger is the bound the webhooks apply: one per manager.
func (o *unreferencedOptions) ledger() *webhook.Unreferenced {
	return &webhook.Unreferenced{MaxBytes: o.maxBytes, MaxSecrets: o.maxSecrets}
}
