package app_test

import (
	"crypto/tls"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cos-externalizer/cos-externalizer/cmd/cos-externalizer/app"
)

func TestParseTLS(t *testing.T) {
	intermediate := []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	}
	tests := map[string]struct {
		profile, minVersion, ciphers string
		want                         app.TLSSettings
		wantErr                      string
	}{
		"intermediate":          {profile: "intermediate", want: app.TLSSettings{MinVersion: tls.VersionTLS12, CipherSuites: intermediate}},
		"modern":                {profile: "modern", want: app.TLSSettings{MinVersion: tls.VersionTLS13}},
		"intermediate at 1.3":   {profile: "intermediate", minVersion: "VersionTLS13", want: app.TLSSettings{MinVersion: tls.VersionTLS13}},
		"modern at 1.2":         {profile: "modern", minVersion: "VersionTLS12", want: app.TLSSettings{MinVersion: tls.VersionTLS12, CipherSuites: intermediate}},
		"explicit 1.2":          {profile: "intermediate", minVersion: "VersionTLS12", want: app.TLSSettings{MinVersion: tls.VersionTLS12, CipherSuites: intermediate}},
		"ciphers override":      {profile: "intermediate", ciphers: " TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 ,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,", want: app.TLSSettings{MinVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}},
		"duplicate cipher":      {profile: "intermediate", ciphers: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", want: app.TLSSettings{MinVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}}},
		"CBC is known":          {profile: "intermediate", ciphers: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", want: app.TLSSettings{MinVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}},
		"unknown profile":       {profile: "old", wantErr: "--tls-profile"},
		"empty profile":         {wantErr: "--tls-profile"},
		"TLS 1.1":               {profile: "intermediate", minVersion: "VersionTLS11", wantErr: "--tls-min-version"},
		"lower-case version":    {profile: "intermediate", minVersion: "versiontls12", wantErr: "--tls-min-version"},
		"insecure cipher":       {profile: "intermediate", ciphers: "TLS_RSA_WITH_RC4_128_SHA", wantErr: "insecure"},
		"unknown cipher":        {profile: "intermediate", ciphers: "TLS_FOO", wantErr: "no TLS 1.2 cipher suite"},
		"TLS 1.3 cipher":        {profile: "intermediate", ciphers: "TLS_AES_128_GCM_SHA256", wantErr: "no TLS 1.2 cipher suite"},
		"ciphers with modern":   {profile: "modern", ciphers: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", wantErr: "TLS 1.3 is the minimum"},
		"ciphers at 1.3":        {profile: "intermediate", minVersion: "VersionTLS13", ciphers: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", wantErr: "TLS 1.3 is the minimum"},
		"only commas":           {profile: "intermediate", ciphers: ",,", wantErr: "no cipher suite given"},
		"blank ciphers ignored": {profile: "intermediate", ciphers: "  ", want: app.TLSSettings{MinVersion: tls.VersionTLS12, CipherSuites: intermediate}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := app.ParseTLS(tc.profile, tc.minVersion, tc.ciphers)
			if wantedErr(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTLSAndMemoryFlags: Validate refuses what ParseTLS and MemoryLimit refuse.
func TestTLSAndMemoryFlags(t *testing.T) {
	flagCases{
		"defaults":       {},
		"TLS 1.3":        {args: []string{"--tls-min-version=VersionTLS13"}},
		"modern":         {args: []string{"--tls-profile=modern"}},
		"ciphers":        {args: []string{"--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}},
		"bad profile":    {args: []string{"--tls-profile=old"}, wantErr: "--tls-profile"},
		"bad version":    {args: []string{"--tls-min-version=VersionTLS10"}, wantErr: "--tls-min-version"},
		"ciphers at 1.3": {args: []string{"--tls-profile=modern", "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}, wantErr: "--tls-cipher-suites"},
		"ratio 0.5":      {args: []string{"--memory-limit-ratio=0.5"}},
		"ratio 0":        {args: []string{"--memory-limit-ratio=0"}, wantErr: "--memory-limit-ratio"},
		"ratio above 1":  {args: []string{"--memory-limit-ratio=1.5"}, wantErr: "--memory-limit-ratio"},
	}.run(t)
}

// TestTLSSettingsApply: Apply sets the version and a copy of the suites, and leaves the rest alone.
func TestTLSSettingsApply(t *testing.T) {
	s, err := app.ParseTLS(app.TLSProfileIntermediate, "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := &tls.Config{NextProtos: []string{"http/1.1"}}
	s.Apply(c)
	c.CipherSuites[0] = 0
	if c.MinVersion != tls.VersionTLS12 || s.CipherSuites[0] == 0 || len(c.NextProtos) != 1 {
		t.Errorf("config %+v after Apply of %+v", c, s)
	}
}

// FuzzParseTLS: whatever the flags, ParseTLS either refuses them or gives TLS 1.2 or later with only
// secure TLS 1.2 suites, none at TLS 1.3.
func FuzzParseTLS(f *testing.F) {
	f.Add("intermediate", "", "")
	f.Add("modern", "VersionTLS12", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384")
	f.Add("intermediate", "VersionTLS13", ",TLS_RSA_WITH_RC4_128_SHA")
	secure := map[uint16]bool{}
	for _, c := range tls.CipherSuites() {
		secure[c.ID] = true
	}
	f.Fuzz(func(t *testing.T, profile, minVersion, ciphers string) {
		s, err := app.ParseTLS(profile, minVersion, ciphers)
		if err != nil {
			return
		}
		if s.MinVersion != tls.VersionTLS12 && s.MinVersion != tls.VersionTLS13 {
			t.Fatalf("min version %x", s.MinVersion)
		}
		if s.MinVersion == tls.VersionTLS13 && s.CipherSuites != nil {
			t.Fatalf("suites %v at TLS 1.3", s.CipherSuites)
		}
		if s.MinVersion == tls.VersionTLS12 && len(s.CipherSuites) == 0 {
			t.Fatal("no suite at TLS 1.2")
		}
		for _, id := range s.CipherSuites {
			if !secure[id] {
				t.Fatalf("suite %x is not secure", id)
			}
		}
	})
}
