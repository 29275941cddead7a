package admission

import (
	"testing"
)

func TestParseMode(t *testing.T) {
	for in, wantErr := range map[string]bool{"always": false, "oversized": false, "never": false, "": true, "Always": true, "sometimes": true} {
		t.Run(in, func(t *testing.T) {
			m, err := ParseMode(in)
			if (err != nil) != wantErr {
				t.Fatalf("ParseMode(%q) = %q, %v", in, m, err)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	tests := map[string]struct {
		mode        Mode
		annotations map[string]string
		size, n     int
		want        bool
		wantErr     string
	}{
		"oversized, over":                 {mode: ModeOversized, size: 101, n: 1, want: true},
		"oversized, at the threshold":     {mode: ModeOversized, size: 100, n: 1, want: false},
		"oversized, no inline objects":    {mode: ModeOversized, size: 1000, n: 0, want: false},
		"always, small":                   {mode: ModeAlways, size: 1, n: 1, want: true},
		"never, huge":                     {mode: ModeNever, size: 1 << 30, n: 5, want: false},
		"annotation always beats never":   {mode: ModeNever, annotations: map[string]string{Annotation: "always"}, size: 1, n: 1, want: true},
		"annotation never beats always":   {mode: ModeAlways, annotations: map[string]string{Annotation: "never"}, size: 1 << 20, n: 1, want: false},
		"annotation oversized is refused": {mode: ModeAlways, annotations: map[string]string{Annotation: "oversized"}, n: 1, wantErr: `metadata.annotations[cos-externalizer.io/externalize]: Unsupported value: "oversized": supported values: "always", "never"`},
		"other annotations are ignored":   {mode: ModeOversized, annotations: map[string]string{"a": "b"}, size: 101, n: 1, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, ferr := Decide(tc.mode, 100, tc.annotations, tc.size, tc.n)
			if tc.wantErr != "" {
				if ferr == nil || ferr.Error() != tc.wantErr {
					t.Fatalf("error %v, want %s", ferr, tc.wantErr)
				}
				return
			}
			if ferr != nil {
				t.Fatal(ferr)
			}
			if d.Externalize != tc.want || d.Reason == "" {
				t.Errorf("Decide = %+v, want Externalize %v with a reason", d, tc.want)
			}
		})
	}
}
