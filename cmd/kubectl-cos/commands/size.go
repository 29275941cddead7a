package commands

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/yaml"

	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/plugin/sizes"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

type sizeOptions struct {
	*root
	files     resource.FilenameOptions
	mode      string
	threshold int
	output    string
}

func (r *root) sizeCommand() *cobra.Command {
	o := &sizeOptions{root: r}
	cmd := &cobra.Command{
		Use:   "size -f FILE",
		Short: "Show a ClusterObjectSet's size inline and externalized, the limits each form hits, and how to apply it",
		Long: `Show, without a cluster, how large a ClusterObjectSet is in its two forms:

  inline        the file as kubectl sends it;
  externalized  the ClusterObjectSet of refs and the object-data Secrets, exactly as kubectl cos apply
                and the webhook store them (the same planning code);

which of the platform's limits each form hits (the API server's 3 MiB request body, which
client-side kubectl apply fills twice over with the object and its last-applied annotation; ~1.5 MiB
for a stored object; 256 KiB of annotations for client-side kubectl apply; 1 MiB of Secret data), what
the webhook would do with it, and whether to apply it inline or with kubectl cos apply.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return o.run() },
	}
	addFilenameFlags(cmd, &o.files, "holding the ClusterObjectSet(s)")
	cmd.Flags().StringVar(&o.mode, "externalize", string(admission.ModeOversized), "The webhook's --externalize policy to report against: oversized, always or never.")
	cmd.Flags().IntVar(&o.threshold, "externalize-threshold", admission.DefaultThreshold, "The webhook's --externalize-threshold.")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: empty for the report, json or yaml.")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	return cmd
}

func (o *sizeOptions) run() error {
	mode, err := admission.ParseMode(o.mode)
	if err != nil {
		return fmt.Errorf("--externalize: %w", err)
	}
	switch o.output {
	case "", "json", "yaml":
	default:
		return fmt.Errorf("--output: %q is not one of json, yaml", o.output)
	}
	objs, err := o.clusterObjectSets(o.files)
	if err != nil {
		return err
	}
	for i, src := range objs {
		raw, err := json.Marshal(src.Object.Object)
		if err != nil {
			return err
		}
		obj, specSize, err := admission.DecodeCOS(raw)
		if err != nil {
			return fmt.Errorf("%s: not a valid ClusterObjectSet: %w", src.Source, err)
		}
		r, err := sizes.Compute(obj, raw, specSize, sizes.Options{Mode: mode, Threshold: o.threshold, SystemNamespace: o.systemNamespace})
		if err != nil {
			return fmt.Errorf("%s: %w", src.Source, err)
		}
		if i > 0 {
			sep := "\n"
			if o.output == "yaml" {
				sep = "---\n"
			}
			if _, err := fmt.Fprint(o.Out, sep); err != nil {
				return err
			}
		}
		switch o.output {
		case "json":
			b, err := json.MarshalIndent(r, "", "  ")
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintln(o.Out, string(b)); err != nil {
				return err
			}
		case "yaml":
			b, err := yaml.Marshal(r)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprint(o.Out, string(b)); err != nil {
				return err
			}
		default:
			if err := sizes.Render(o.Out, r); err != nil {
				return err
			}
		}
	}
	return nil
}
