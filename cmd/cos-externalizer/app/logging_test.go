package app

import (
	"bytes"
	"encoding/json"
	"flag"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
)

// entry is what a test reads of a JSON log line: its level, message, keys and the form of its ts.
type entry struct {
	Level, Msg, TS string
	Keys           []string
}

var tsForms = map[string]*regexp.Regexp{
	"iso8601": regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`),
	"rfc3339": regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`),
}

// logLines builds the logger of args, writes a debug, an info and an error entry, and returns the
// lines written.
func logLines(t *testing.T, args ...string) []string {
	t.Helper()
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.Bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zl, err := o.logging.newLogger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	zl.Debug("d")
	zl.Info("i", zap.String("k", "v"))
	zl.Error("e")
	return strings.Split(strings.TrimSpace(buf.String()), "\n")
}

// TestLoggerJSON: without flags the manager logs as before the zap flags (JSON, ts in ISO 8601,
// caller, stack traces from error, no debug), and each zap flag and deprecated alias changes what it
// says.
func TestLoggerJSON(t *testing.T) {
	info := entry{Level: "info", Msg: "i", TS: "iso8601", Keys: []string{"caller", "k", "level", "msg", "ts"}}
	errorEntry := entry{Level: "error", Msg: "e", TS: "iso8601", Keys: []string{"caller", "level", "msg", "stacktrace", "ts"}}
	debug := entry{Level: "debug", Msg: "d", TS: "iso8601", Keys: []string{"caller", "level", "msg", "ts"}}
	tests := map[string]struct {
		args []string
		want []entry
	}{
		"defaults":                  {want: []entry{info, errorEntry}},
		"zap level debug":           {args: []string{"--zap-log-level=debug"}, want: []entry{debug, info, errorEntry}},
		"zap level error":           {args: []string{"--zap-log-level=error"}, want: []entry{errorEntry}},
		"zap verbosity 2":           {args: []string{"--zap-log-level=2"}, want: []entry{debug, info, errorEntry}},
		"alias level debug":         {args: []string{"--log-level=debug"}, want: []entry{debug, info, errorEntry}},
		"alias level warn":          {args: []string{"--log-level=warn"}, want: []entry{errorEntry}},
		"alias format json":         {args: []string{"--log-format=json"}, want: []entry{info, errorEntry}},
		"zap encoder json":          {args: []string{"--zap-encoder=json"}, want: []entry{info, errorEntry}},
		"stack traces from info":    {args: []string{"--zap-stacktrace-level=info"}, want: []entry{{Level: "info", Msg: "i", TS: "iso8601", Keys: []string{"caller", "k", "level", "msg", "stacktrace", "ts"}}, errorEntry}},
		"time rfc3339":              {args: []string{"--zap-time-encoding=rfc3339"}, want: []entry{{Level: "info", Msg: "i", TS: "rfc3339", Keys: info.Keys}, {Level: "error", Msg: "e", TS: "rfc3339", Keys: errorEntry.Keys}}},
		"time epoch":                {args: []string{"--zap-time-encoding=epoch"}, want: []entry{{Level: "info", Msg: "i", TS: "number", Keys: info.Keys}, {Level: "error", Msg: "e", TS: "number", Keys: errorEntry.Keys}}},
		"alias level and zap other": {args: []string{"--log-level=error", "--zap-encoder=json"}, want: []entry{errorEntry}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []entry
			for _, line := range logLines(t, tc.args...) {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
				e := entry{Level: m["level"].(string), Msg: m["msg"].(string)}
				for k := range m {
					e.Keys = append(e.Keys, k)
				}
				slices.Sort(e.Keys)
				switch ts := m["ts"].(type) {
				case float64:
					e.TS = "number"
				case string:
					for form, re := range tsForms {
						if re.MatchString(ts) {
							e.TS = form
						}
					}
				}
				got = append(got, e)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoggerConsole: the console encoder, by its flag, its deprecated alias or development mode
// (which also logs debug).
func TestLoggerConsole(t *testing.T) {
	tests := map[string]struct {
		args []string
		want []string
	}{
		"zap encoder": {args: []string{"--zap-encoder=console"}, want: []string{"INFO\ti", "ERROR\te"}},
		"alias":       {args: []string{"--log-format=console"}, want: []string{"INFO\ti", "ERROR\te"}},
		"devel":       {args: []string{"--zap-devel"}, want: []string{"DEBUG\td", "INFO\ti", "ERROR\te"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, line := range logLines(t, tc.args...) {
				if strings.HasPrefix(line, "{") {
					t.Fatalf("JSON line %q", line)
				}
				if fields := strings.Split(line, "\t"); len(fields) >= 4 { // ts, level, caller, msg
					got = append(got, fields[1]+"\t"+fields[3])
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("level and message of the entries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoggingFlagErrors: bad values are refused when parsed, naming the flag; a deprecated flag given
// with the zap flag it is an alias of is refused by Validate and by NewLogger, whatever their order.
func TestLoggingFlagErrors(t *testing.T) {
	tests := map[string]struct {
		args                 []string
		parseErr, invalidErr string
	}{
		"alias level unknown":   {args: []string{"--log-level=loud"}, parseErr: "-log-level"},
		"alias format unknown":  {args: []string{"--log-format=xml"}, parseErr: `"xml" is neither json nor console`},
		"zap level unknown":     {args: []string{"--zap-log-level=loud"}, parseErr: "-zap-log-level"},
		"zap level warn":        {args: []string{"--zap-log-level=warn"}, parseErr: "-zap-log-level"},
		"zap encoder unknown":   {args: []string{"--zap-encoder=xml"}, parseErr: "-zap-encoder"},
		"zap stacktrace debug":  {args: []string{"--zap-stacktrace-level=debug"}, parseErr: "-zap-stacktrace-level"},
		"zap time unknown":      {args: []string{"--zap-time-encoding=sundial"}, parseErr: "-zap-time-encoding"},
		"level both":            {args: []string{"--log-level=debug", "--zap-log-level=info"}, invalidErr: "--log-level: deprecated alias of --zap-log-level, and both are given"},
		"level both, zap first": {args: []string{"--zap-log-level=info", "--log-level=debug"}, invalidErr: "--log-level: deprecated alias of --zap-log-level, and both are given"},
		"format both":           {args: []string{"--zap-encoder=json", "--log-format=json"}, invalidErr: "--log-format: deprecated alias of --zap-encoder, and both are given"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var o Options
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(&bytes.Buffer{})
			o.Bind(fs)
			err := fs.Parse(tc.args)
			if tc.parseErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.parseErr) {
					t.Fatalf("parse error %v, want one containing %q", err, tc.parseErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for what, err := range map[string]error{"Validate": o.Validate(), "NewLogger": second(o.logging.newLogger(&bytes.Buffer{}))} {
				if err == nil || !strings.Contains(err.Error(), tc.invalidErr) {
					t.Errorf("%s: error %v, want one containing %q", what, err, tc.invalidErr)
				}
			}
		})
	}
}

func second[T any](_ T, err error) error { return err }
