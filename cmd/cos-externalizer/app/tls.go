package app

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
)

// TLS profiles of --tls-profile, after Mozilla's server-side TLS recommendations (OLM's
// operator-controller offers the same two by name).
const (
	// TLSProfileIntermediate: TLS 1.2 with the ECDHE AEAD cipher suites, and TLS 1.3.
	TLSProfileIntermediate = "intermediate"
	// TLSProfileModern: TLS 1.3 only.
	TLSProfileModern = "modern"
)

// intermediateCipherSuites are Mozilla's intermediate TLS 1.2 suites that Go implements.
var intermediateCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// tlsVersions are the values of --tls-min-version, named as Kubernetes' components name them.
var tlsVersions = map[string]uint16{"VersionTLS12": tls.VersionTLS12, "VersionTLS13": tls.VersionTLS13}

// TLSSettings are what the webhook and metrics servers accept: a minimum version and, below TLS 1.3,
// the cipher suites (Go does not let TLS 1.3's be configured; nil there).
type TLSSettings struct {
	MinVersion   uint16
	CipherSuites []uint16
}

// Apply sets s on c (a tls.Config option of controller-runtime's servers).
func (s TLSSettings) Apply(c *tls.Config) {
	c.MinVersion = s.MinVersion
	c.CipherSuites = slices.Clone(s.CipherSuites)
}

// ParseTLS resolves --tls-profile, then --tls-min-version and --tls-cipher-suites (comma-separated Go
// names), each of which overrides the profile's value when not empty. TLS 1.0 and 1.1, and the suites
// Go lists as insecure, are refused; so are cipher suites with a minimum of TLS 1.3, which would have
// no effect.
func ParseTLS(profile, minVersion, cipherSuites string) (TLSSettings, error) {
	var s TLSSettings
	switch profile {
	case TLSProfileIntermediate:
		s = TLSSettings{MinVersion: tls.VersionTLS12, CipherSuites: intermediateCipherSuites}
	case TLSProfileModern:
		s = TLSSettings{MinVersion: tls.VersionTLS13}
	default:
		return TLSSettings{}, fmt.Errorf("--tls-profile: %q is neither %s nor %s", profile, TLSProfileIntermediate, TLSProfileModern)
	}
	if minVersion != "" {
		v, ok := tlsVersions[minVersion]
		if !ok {
			return TLSSettings{}, fmt.Errorf("--tls-min-version: %q is neither VersionTLS12 nor VersionTLS13", minVersion)
		}
		s.MinVersion = v
	}
	switch {
	case s.MinVersion == tls.VersionTLS13:
		s.CipherSuites = nil
	case s.CipherSuites == nil: // modern lowered to TLS 1.2
		s.CipherSuites = intermediateCipherSuites
	}
	if strings.TrimSpace(cipherSuites) == "" {
		return s, nil
	}
	if s.MinVersion == tls.VersionTLS13 {
		return TLSSettings{}, errors.New("--tls-cipher-suites: TLS 1.3 is the minimum, whose cipher suites Go does not let be configured")
	}
	known := map[string]uint16{}
	for _, c := range tls.CipherSuites() {
		if slices.Contains(c.SupportedVersions, tls.VersionTLS12) {
			known[c.Name] = c.ID
		}
	}
	insecure := map[string]bool{}
	for _, c := range tls.InsecureCipherSuites() {
		insecure[c.Name] = true
	}
	s.CipherSuites = nil
	for _, name := range strings.Split(cipherSuites, ",") {
		name = strings.TrimSpace(name)
		id, ok := known[name]
		switch {
		case name == "":
			continue
		case insecure[name]:
			return TLSSettings{}, fmt.Errorf("--tls-cipher-suites: %q is insecure", name)
		case !ok:
			return TLSSettings{}, fmt.Errorf("--tls-cipher-suites: %q is no TLS 1.2 cipher suite Go knows", name)
		case !slices.Contains(s.CipherSuites, id):
			s.CipherSuites = append(s.CipherSuites, id)
		}
	}
	if len(s.CipherSuites) == 0 {
		return TLSSettings{}, errors.New("--tls-cipher-suites: no cipher suite given")
	}
	return s, nil
}

// tlsOptions are the TLS flags of the webhook and metrics servers.
type tlsOptions struct {
	profile, minVersion, cipherSuites string
}

func (o *tlsOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.profile, "tls-profile", TLSProfileIntermediate, "TLS profile of the webhook and metrics servers: intermediate (TLS 1.2 with ECDHE AEAD cipher suites, and TLS 1.3) or modern (TLS 1.3 only); --tls-min-version and --tls-cipher-suites override it.")
	fs.StringVar(&o.minVersion, "tls-min-version", "", "Minimum TLS version of the webhook and metrics servers: VersionTLS12 or VersionTLS13 (default: the profile's).")
	fs.StringVar(&o.cipherSuites, "tls-cipher-suites", "", "Comma-separated TLS 1.2 cipher suites (Go names, e.g. TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) of the webhook and metrics servers (default: the profile's); TLS 1.3's are not configurable.")
}

func (o *tlsOptions) settings() (TLSSettings, error) {
	return ParseTLS(o.profile, o.minVersion, o.cipherSuites)
}
