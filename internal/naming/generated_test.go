package naming

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
)

var hashSuffix = regexp.MustCompile(`-[0-9a-f]{16}$`)

func TestSecretName(t *testing.T) {
	data := map[string][]byte{"k1": []byte("v1"), "k2": []byte("v2")}
	long := strings.Repeat("a", 240)
	tests := map[string]struct {
		cosName    string
		data       map[string][]byte
		wantPrefix string
	}{
		"short name":                  {"my-ext-1", data, "my-ext-1"},
		"dotted name":                 {"my.ext.v1", data, "my.ext.v1"},
		"236 characters: kept whole":  {strings.Repeat("b", 236), data, strings.Repeat("b", 236)},
		"237 characters: truncated":   {strings.Repeat("b", 237), data, strings.Repeat("b", 236)},
		"253 characters":              {strings.Repeat("c", 253), data, strings.Repeat("c", 236)},
		"trailing dash trimmed":       {strings.Repeat("d", 235) + "-e" + long, data, strings.Repeat("d", 235)},
		"trailing dots/dashes":        {strings.Repeat("d", 232) + "-.-.-e" + long, data, strings.Repeat("d", 232)},
		"empty data":                  {"cos", nil, "cos"},
		"subdomain labels, truncated": {strings.Repeat("abcdefgh.", 30) + "x", data, strings.TrimRight(strings.Repeat("abcdefgh.", 30)[:236], ".")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := SecretName(tc.cosName, tc.data)
			if errs := utilvalidation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Errorf("SecretName = %q (%d chars): not a DNS subdomain: %v", got, len(got), errs)
			}
			if !hashSuffix.MatchString(got) {
				t.Fatalf("SecretName = %q: no -<16 hex> suffix", got)
			}
			if diff := cmp.Diff(tc.wantPrefix, hashSuffix.ReplaceAllString(got, "")); diff != "" {
				t.Errorf("prefix (-want +got):\n%s", diff)
			}
			if again := SecretName(tc.cosName, copyData(tc.data)); again != got {
				t.Errorf("SecretName not stable: %q then %q", got, again)
			}
		})
	}
}

// TestSecretNameDistinct lists inputs that must all give different names.
func TestSecretNameDistinct(t *testing.T) {
	prefix := strings.Repeat("x", 236)
	inputs := map[string]struct {
		cosName string
		data    map[string][]byte
	}{
		"base":                  {"cos", map[string][]byte{"ab": []byte("c")}},
		"key/value boundary":    {"cos", map[string][]byte{"a": []byte("bc")}},
		"value moved to key":    {"cos", map[string][]byte{"abc": nil}},
		"two entries":           {"cos", map[string][]byte{"a": []byte("b"), "c": nil}},
		"other value":           {"cos", map[string][]byte{"ab": []byte("d")}},
		"empty":                 {"cos", nil},
		"other COS":             {"cos2", map[string][]byte{"ab": []byte("c")}},
		"long name 1":           {prefix + "-one", map[string][]byte{"ab": []byte("c")}},
		"long name 2":           {prefix + "-two", map[string][]byte{"ab": []byte("c")}},
		"the truncated prefix":  {prefix, map[string][]byte{"ab": []byte("c")}},
		"long name 1, new data": {prefix + "-one", map[string][]byte{"ab": []byte("d")}},
	}
	seen := map[string]string{}
	for name, in := range inputs {
		got := SecretName(in.cosName, in.data)
		if other, ok := seen[got]; ok {
			t.Errorf("%s and %s share the name %q", name, other, got)
		}
		seen[got] = name
	}
}

// TestSecretNameGolden pins the hash: names must not change between releases, or a dry-run of an
// unchanged ClusterObjectSet would no longer match the stored one.
func TestSecretNameGolden(t *testing.T) {
	tests := map[string]struct {
		cosName string
		data    map[string][]byte
		want    string
	}{
		"one entry":  {"my-ext-1", map[string][]byte{"k": []byte("v")}, "my-ext-1-3eec20b33c2aa17e"},
		"long name":  {strings.Repeat("n", 300), map[string][]byte{"k": []byte("v")}, strings.Repeat("n", 236) + "-697a1cf2662a499a"},
		"empty data": {"my-ext-1", nil, "my-ext-1-e3b0c44298fc1c14"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SecretName(tc.cosName, tc.data)); diff != "" {
				t.Errorf("SecretName (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRevisionLabelValue(t *testing.T) {
	tests := map[string]struct {
		cosName    string
		wantPrefix string // "" with wantSame
		wantSame   bool
	}{
		"short":                 {"my-ext-1", "", true},
		"63 characters":         {strings.Repeat("a", 63), "", true},
		"dots and dashes":       {"a.b-c", "", true},
		"64 characters":         {strings.Repeat("a", 64), strings.Repeat("a", 46), false},
		"253-char subdomain":    {strings.Repeat("abc.", 63) + "a", strings.Repeat("abc.", 11) + "ab", false},
		"dash at the cut":       {strings.Repeat("a", 45) + "-" + strings.Repeat("b", 30), strings.Repeat("a", 45), false},
		"invalid characters":    {"a/b:c", "a-b-c", false},
		"starts with a dash":    {"-abc", "abc", false},
		"only invalid":          {"///", "", false},
		"non-ASCII":             {"é" + strings.Repeat("z", 70), strings.Repeat("z", 44), false},
		"empty stays empty":     {"", "", true},
		"ends with a dot, long": {strings.Repeat("q", 70) + ".", strings.Repeat("q", 46), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := RevisionLabelValue(tc.cosName)
			if errs := utilvalidation.IsValidLabelValue(got); len(errs) > 0 {
				t.Fatalf("RevisionLabelValue = %q: not a label value: %v", got, errs)
			}
			if tc.wantSame {
				if got != tc.cosName {
					t.Errorf("RevisionLabelValue = %q, want the name itself", got)
				}
				return
			}
			if !regexp.MustCompile(`(^|-)[0-9a-f]{16}$`).MatchString(got) {
				t.Fatalf("RevisionLabelValue = %q: no hash suffix", got)
			}
			prefix := strings.TrimSuffix(got[:len(got)-16], "-")
			if diff := cmp.Diff(tc.wantPrefix, prefix); diff != "" {
				t.Errorf("prefix (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRevisionLabelValueDistinct(t *testing.T) {
	prefix := strings.Repeat("p", 60)
	a, b := RevisionLabelValue(prefix+"-one"), RevisionLabelValue(prefix+"-two")
	if a == b {
		t.Errorf("two long names share the label value %q", a)
	}
	if c := RevisionLabelValue(prefix + "-one"); c != a {
		t.Errorf("not stable: %q then %q", a, c)
	}
}

func copyData(d map[string][]byte) map[string][]byte {
	if d == nil {
		return nil
	}
	out := make(map[string][]byte, len(d))
	for k, v := range d {
		out[k] = append([]byte(nil), v...)
	}
	return out
}
