package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// zapFlags are controller-runtime's logging flags (zap.Options.BindFlags, the flags of every
// kubebuilder operator), with the help text of this manager: its defaults are not controller-runtime's
// in the time encoding (ISO 8601, as before the flags existed).
var zapFlags = map[string]string{
	"zap-devel":            "Development mode: console encoder, level debug, stack traces from warn, no sampling (each unless given by its own flag). Off: JSON, info, stack traces from error, sampling.",
	"zap-encoder":          "Log `encoding`: json or console (default json; console with --zap-devel).",
	"zap-log-level":        "Log `level`: debug, info, error, panic, or an integer n > 0 for logr verbosity n (default info; debug with --zap-devel).",
	"zap-stacktrace-level": "Log entries at this `level` and above carry a stack trace: info, error or panic (default error; warn with --zap-devel).",
	"zap-time-encoding":    "The `encoding` of the ts key: epoch, millis, nano, iso8601, rfc3339 or rfc3339nano (default iso8601).",
}

// deprecatedLogFlags are the logging flags before the zap flags: each an alias of the zap flag it names,
// still working. Giving both is an error rather than "the last one wins", which would depend on their
// order in the container's arguments, wherever a patch or an overlay put them.
var deprecatedLogFlags = map[string]string{"log-level": "zap-log-level", "log-format": "zap-encoder"}

// loggingOptions are the logging flags: controller-runtime's zap flags and the deprecated aliases.
type loggingOptions struct {
	zap crzap.Options
	// given are the logging flags the command line set.
	given map[string]bool
}

// givenValue records that its flag was set, then sets the value it wraps.
type givenValue struct {
	flag.Value
	name  string
	given map[string]bool
}

func (v *givenValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return err
	}
	v.given[v.name] = true
	return nil
}

// IsBoolFlag forwards the wrapped value's (--zap-devel), which lets the flag be given without a value.
func (v *givenValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func (v *givenValue) String() string {
	if v == nil || v.Value == nil {
		return ""
	}
	return v.Value.String()
}

// aliasValue is a deprecated flag's value: set parses and applies it.
type aliasValue struct {
	value string
	set   func(string) error
}

func (v *aliasValue) Set(s string) error {
	if err := v.set(s); err != nil {
		return err
	}
	v.value = s
	return nil
}

func (v *aliasValue) String() string {
	if v == nil {
		return ""
	}
	return v.value
}

func (l *loggingOptions) bind(fs *flag.FlagSet) {
	l.given = map[string]bool{}
	l.zap.TimeEncoder = zapcore.ISO8601TimeEncoder
	zapSet := flag.NewFlagSet("zap", flag.ContinueOnError)
	l.zap.BindFlags(zapSet)
	zapSet.VisitAll(func(f *flag.Flag) {
		usage, ok := zapFlags[f.Name]
		if !ok {
			usage = f.Usage
		}
		fs.Var(&givenValue{Value: f.Value, name: f.Name, given: l.given}, f.Name, usage)
	})
	encoder := zapSet.Lookup("zap-encoder").Value
	fs.Var(&givenValue{name: "log-level", given: l.given, Value: &aliasValue{set: func(s string) error {
		level, err := zapcore.ParseLevel(s)
		if err != nil {
			return err
		}
		l.zap.Level = zap.NewAtomicLevelAt(level)
		return nil
	}}}, "log-level", "Deprecated: use --zap-log-level, which this is an alias of (not to be given with it). Log `level`: debug, info, warn or error.")
	fs.Var(&givenValue{name: "log-format", given: l.given, Value: &aliasValue{set: func(s string) error {
		if s != "json" && s != "console" {
			return fmt.Errorf("%q is neither json nor console", s)
		}
		return encoder.Set(s)
	}}}, "log-format", "Deprecated: use --zap-encoder, which this is an alias of (not to be given with it). Log `format`: json or console.")
}

// validate refuses a deprecated flag given with the zap flag it is an alias of.
func (l *loggingOptions) validate() error {
	var errs []error
	for _, old := range []string{"log-format", "log-level"} {
		if l.given[old] && l.given[deprecatedLogFlags[old]] {
			errs = append(errs, fmt.Errorf("--%s: deprecated alias of --%s, and both are given: give --%[2]s alone", old, deprecatedLogFlags[old]))
		}
	}
	return errors.Join(errs...)
}

// NewLogger builds the zap logger behind logr from the logging flags; keys are stable across
// releases. By default it logs as before the zap flags: JSON to stderr with the keys ts (ISO 8601),
// level, logger, caller, msg and stacktrace (from error), sampled.
func NewLogger(o *Options) (*zap.Logger, error) {
	return o.logging.newLogger(os.Stderr)
}

func (l *loggingOptions) newLogger(w io.Writer) (*zap.Logger, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	opts := l.zap
	opts.DestWriter = w
	return crzap.NewRaw(crzap.UseFlagOptions(&opts), crzap.RawZapOpts(zap.AddCaller())), nil
}

// warn logs msg at zap's warn level when log is zap's (the manager's), else as an error: something
// the operator must act on, which is neither routine (info) nor a failure of the manager (error).
func warn(log logr.Logger, msg string, keysAndValues ...any) {
	if u, ok := log.GetSink().(zapr.Underlier); ok {
		u.GetUnderlying().WithOptions(zap.AddCallerSkip(1)).Sugar().Warnw(msg, keysAndValues...)
		return
	}
	log.Error(nil, msg, keysAndValues...)
}
