package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/resource"

	olmv1 "github.com/cos-externalizer/cos-externalizer/api/v1"
	"github.com/cos-externalizer/cos-externalizer/cmd/kubectl-cos/plugin/cosdiff"
	"github.com/cos-externalizer/cos-externalizer/internal/content"
	"github.com/cos-externalizer/cos-externalizer/internal/kube/objectdata"
	"github.com/cos-externalizer/cos-externalizer/internal/secretdata"
	"github.com/cos-externalizer/cos-externalizer/webhook/admission"
)

type diffOptions struct {
	*root
	files      resource.FilenameOptions
	showSecret bool
	resolve    secretdata.ResolveMemory
}

func (r *root) diffCommand() *cobra.Command {
	o := &diffOptions{root: r}
	cmd := &cobra.Command{
		Use:   "diff A B | diff -f FILE",
		Short: "Show the object-level differences between two ClusterObjectSets, or a file and the cluster",
		Long: `Show the differences between two stored ClusterObjectSets (two revisions, A then B), or between a
file and the stored ClusterObjectSet of the same name (-f), on their resolved content: refs are read
from their Secrets, so an inline file and its externalized, stored form compare equal.

Each object becomes one file, named by group, kind, namespace and name and starting with the phase it
is in; the ClusterObjectSet's own fields (revision, phases and their order, probes, labels) are one
more file. Like kubectl diff, the two folders are compared with "diff -u -N", or the program named by
KUBECTL_EXTERNAL_DIFF (e.g. KUBECTL_EXTERNAL_DIFF="colordiff -N -u"), and the values of Secret
objects are masked unless --show-secret is given.

Exit status, as kubectl diff's: 0 when there is no difference, 1 when there are differences, 2 on
errors (a bad flag, a file or ClusterObjectSet that cannot be read), or the diff program's own status
when it is over 1.`,
		Example: `  kubectl cos diff my-operator-2 my-operator-3
  kubectl cos diff -f cos.yaml`,
		ValidArgsFunction: r.completeNames,
		// As kubectl diff: 1 means differences, so errors (flags, reading, the cluster) are 2.
		Annotations: map[string]string{errorExitCodeAnnotation: "2"},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case !hasFiles(o.files) && len(args) == 2:
				return o.run(cmd.Context(), args[0], args[1])
			case hasFiles(o.files) && len(args) == 0:
				return o.runFile(cmd.Context())
			}
			return errors.New("give two ClusterObjectSet names, or -f FILE")
		},
	}
	addFilenameFlags(cmd, &o.files, "holding the ClusterObjectSet to compare with the stored one of its name")
	cmd.Flags().BoolVar(&o.showSecret, "show-secret", false, "Show the values of Secret objects instead of masking them.")
	cmd.Flags().Int64Var(&o.resolve.MaxResolvedBytes, "max-resolved-bytes", content.DefaultMaxResolvedBytes, "The most content decoded to resolve the refs of each side.")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	return cmd
}

func (o *diffOptions) run(ctx context.Context, a, b string) error {
	cl, err := o.clients()
	if err != nil {
		return err
	}
	ca, err := resolvedCOS(ctx, cl, a, o.systemNamespace, o.resolve)
	if err != nil {
		return err
	}
	cb, err := resolvedCOS(ctx, cl, b, o.systemNamespace, o.resolve)
	if err != nil {
		return err
	}
	return o.compare(ca, cb, a, b)
}

func (o *diffOptions) runFile(ctx context.Context) error {
	objs, err := o.clusterObjectSets(o.files)
	if err != nil {
		return err
	}
	if len(objs) != 1 {
		return fmt.Errorf("the files hold %d ClusterObjectSets; diff -f compares one", len(objs))
	}
	raw, err := json.Marshal(objs[0].Object.Object)
	if err != nil {
		return err
	}
	file, _, err := admission.DecodeCOS(raw)
	if err != nil {
		return fmt.Errorf("%s: not a valid ClusterObjectSet: %w", objs[0].Source, err)
	}
	cl, err := o.clients()
	if err != nil {
		return err
	}
	// Refs in the file resolve from the cluster too.
	if file.Spec.Phases, err = admission.Inline(file.Spec.Phases, objectdata.Resolver(ctx, cl.client, o.systemNamespace, o.resolve)); err != nil {
		return fmt.Errorf("%s: %w", objs[0].Source, err)
	}
	live, err := resolvedCOS(ctx, cl, file.Name, o.systemNamespace, o.resolve)
	if apierrors.IsNotFound(err) {
		live, err = nil, nil
	}
	if err != nil {
		return err
	}
	return o.compare(live, file, "live", "file")
}

// validDiffArg is what kubectl allows in KUBECTL_EXTERNAL_DIFF's arguments.
var validDiffArg = regexp.MustCompile(`^[a-zA-Z0-9-=]+$`)

// compare writes the changed files of both sides into two folders and runs the diff program on them.
func (o *diffOptions) compare(a, b *olmv1.ClusterObjectSet, nameA, nameB string) error {
	entries, err := cosdiff.Diff(a, b, cosdiff.Options{ShowSecret: o.showSecret})
	if err != nil {
		return err
	}
	notef(o.ErrOut, "kubectl-cos: %s\n", cosdiff.Summary(entries))
	tmp, err := os.MkdirTemp("", "kubectl-cos-diff-")
	if err != nil {
		return err
	}
	defer func() {
		if err := os.RemoveAll(tmp); err != nil {
			notef(o.ErrOut, "kubectl-cos: removing the diff's temporary folder: %v\n", err)
		}
	}()
	dirA, dirB := filepath.Join(tmp, dirName(nameA)), filepath.Join(tmp, dirName(nameB))
	if nameA == nameB {
		dirA, dirB = dirA+"-A", dirB+"-B"
	}
	for _, d := range []string{dirA, dirB} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if e.Status == cosdiff.Unchanged {
			continue
		}
		if e.A != nil {
			if err := os.WriteFile(filepath.Join(dirA, e.File), e.A, 0o600); err != nil {
				return err
			}
		}
		if e.B != nil {
			if err := os.WriteFile(filepath.Join(dirB, e.File), e.B, 0o600); err != nil {
				return err
			}
		}
	}
	program, args := "diff", []string{"-u", "-N"}
	if env := os.Getenv("KUBECTL_EXTERNAL_DIFF"); env != "" {
		fields := strings.Fields(env)
		program, args = fields[0], nil
		for _, a := range fields[1:] {
			if !validDiffArg.MatchString(a) {
				return fmt.Errorf("KUBECTL_EXTERNAL_DIFF: argument %q is not allowed (letters, digits, '-' and '=' only)", a)
			}
			args = append(args, a)
		}
	}
	cmd := exec.Command(program, append(args, dirA, dirB)...)
	cmd.Stdout, cmd.Stderr = o.Out, o.ErrOut
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		// diff exits 1 when the folders differ: so does kubectl cos diff; more is an error of diff,
		// which is passed on (kubectl diff passes it on too).
		return &ExitError{Code: exit.ExitCode()}
	case err != nil:
		return fmt.Errorf("running %s: %w", program, err)
	}
	return nil
}

// dirName is a folder name for one side.
func dirName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator {
			return '_'
		}
		return r
	}, s)
}
