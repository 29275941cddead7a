package commands

import (
	"encoding/json"
	goflag "flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// addKlogFlags adds klog's -v/--v and --vmodule to fs, as kubectl has them: -v=6 logs client-go's
// requests, -v=8 their bodies (which may hold Secret content: as kubectl's, at your choice).
func addKlogFlags(fs *pflag.FlagSet) {
	gfs := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(gfs)
	for _, name := range []string{"v", "vmodule"} {
		// pflag gives a one-letter Go flag that letter as its shorthand: -v and --v.
		fs.AddGoFlag(gfs.Lookup(name))
	}
}

// versionInfo is the plugin's version, read from what the build recorded.
func versionInfo() version.Info {
	info := version.Info{GitVersion: Version, GoVersion: runtime.Version(), Compiler: runtime.Compiler,
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if v, err := utilversion.ParseSemantic(Version); err == nil {
		info.Major, info.Minor = strconv.FormatUint(uint64(v.Major()), 10), strconv.FormatUint(uint64(v.Minor()), 10)
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.GitCommit = s.Value
			case "vcs.time":
				info.BuildDate = s.Value
			case "vcs.modified":
				info.GitTreeState = map[string]string{"true": "dirty", "false": "clean"}[s.Value]
			}
		}
	}
	return info
}

// versionOutput is what version -o json|yaml prints, in kubectl version --client's shape.
type versionOutput struct {
	PluginVersion version.Info `json:"pluginVersion"`
}

func (r *root) versionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Long:  "Print the plugin's version, as kubectl version --client prints kubectl's; -o json or yaml prints its build details too.",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return printVersion(r, output, versionInfo())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: empty, json or yaml.")
	return cmd
}

func printVersion(r *root, output string, info version.Info) error {
	var b []byte
	var err error
	switch output {
	case "":
		_, err = fmt.Fprintf(r.Out, "Plugin Version: %s\n", info.GitVersion)
		return err
	case "json":
		b, err = json.MarshalIndent(versionOutput{PluginVersion: info}, "", "  ")
		b = append(b, '\n')
	case "yaml":
		b, err = yaml.Marshal(versionOutput{PluginVersion: info})
	default:
		return fmt.Errorf("--output %q: want json or yaml, or nothing", output)
	}
	if err != nil {
		return err
	}
	_, err = r.Out.Write(b)
	return err
}
