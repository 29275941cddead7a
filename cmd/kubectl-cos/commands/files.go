package commands

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// addFilenameFlags adds kubectl's -f (repeatable), -k and -R to cmd, into o.
func addFilenameFlags(cmd *cobra.Command, o *resource.FilenameOptions, what string) {
	cmd.Flags().VarP((*filenames)(&o.Filenames), "filename", "f", "Files, folders or glob patterns "+what+" (repeatable or comma-separated; - for standard input).")
	cmd.Flags().StringVarP(&o.Kustomize, "kustomize", "k", "", "A kustomization folder "+what+": its kustomize build, as kubectl -k.")
	cmd.Flags().BoolVarP(&o.Recursive, "recursive", "R", false, "Read the manifest files of -f's folders' subfolders too.")
}

// filenames is -f: repeatable, and comma-separated as kubectl's -f, except that a value that is an
// existing path is taken whole (a folder whose name holds a comma).
type filenames []string

func (f *filenames) String() string { return "[" + strings.Join(*f, ",") + "]" }
func (f *filenames) Type() string   { return "strings" }

func (f *filenames) Set(v string) error {
	if _, err := os.Stat(v); err == nil {
		*f = append(*f, v)
		return nil
	}
	r := csv.NewReader(strings.NewReader(v))
	vals, err := r.Read()
	if err != nil {
		return err
	}
	*f = append(*f, vals...)
	return nil
}

// readFiles reads what -f, -k and -R name, as kubectl reads them (cli-runtime's resource builder's
// rules: a folder's .json, .yaml and .yml files in the order filepath.Walk gives, subfolders with
// -R, a pattern when no such file exists, - for standard input; -k's kustomize build with kubectl's
// options), keeping each file's bytes so that bundle.Parse names the file and line of a problem.
func (r *root) readFiles(o resource.FilenameOptions) ([]input, error) {
	switch {
	case len(o.Filenames) > 0 && o.Kustomize != "":
		return nil, errors.New("only one of -f or -k can be given")
	case o.Kustomize != "" && o.Recursive:
		return nil, errors.New("the -k flag cannot be used with -R")
	case o.Kustomize != "":
		b, err := kustomize(o.Kustomize)
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %w", o.Kustomize, err)
		}
		return []input{{name: o.Kustomize, data: b}}, nil
	}
	var out []input
	for _, p := range o.Filenames {
		if p == "-" {
			b, err := io.ReadAll(r.In)
			if err != nil {
				return nil, fmt.Errorf("reading standard input: %w", err)
			}
			out = append(out, input{name: "-", data: b})
			continue
		}
		if strings.HasPrefix(p, "http://") || strings.HasPrefix(p, "https://") {
			return nil, fmt.Errorf("%s: URLs are not read: download the file and give its path", p)
		}
		matches, err := expandPattern(p)
		if err != nil {
			return nil, err
		}
		for _, m := range matches {
			visitors, err := resource.ExpandPathsToFileVisitors(nil, m, o.Recursive, resource.FileExtensions, nil)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", m, err)
			}
			if len(visitors) == 0 {
				return nil, fmt.Errorf("%s: no .yaml, .yml or .json files", m)
			}
			for _, v := range visitors {
				path := v.(*resource.FileVisitor).Path
				b, err := os.ReadFile(path)
				if err != nil {
					return nil, err
				}
				out = append(out, input{name: path, data: b})
			}
		}
	}
	return out, nil
}

// expandPattern is a path, or the paths a glob pattern matches when no such path exists (as kubectl).
func expandPattern(p string) ([]string, error) {
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		return []string{p}, nil
	}
	matches, err := filepath.Glob(p)
	if err != nil {
		return nil, fmt.Errorf("pattern %q is not valid: %w", p, err)
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("the path %q does not exist", p)
	}
	return matches, nil
}

// kustomize is the kustomize build of dir with the options kubectl -k runs it with.
func kustomize(dir string) ([]byte, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}

// hasFiles says whether -f or -k was given.
func hasFiles(o resource.FilenameOptions) bool { return len(o.Filenames) > 0 || o.Kustomize != "" }
