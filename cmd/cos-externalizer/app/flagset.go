package app

import "flag"

// NewFlagSet returns the manager's flag set with every flag bound to o: the flags of
// Options.Bind and --version. The flag reference (docs/reference/manager-flags.md,
// hack/gen/flagref) is generated from it.
func NewFlagSet(o *Options) *flag.FlagSet {
	fs := flag.NewFlagSet("cos-externalizer", flag.ContinueOnError)
	o.Bind(fs)
	fs.Bool("version", false, "Print the version and exit.")
	return fs
}
