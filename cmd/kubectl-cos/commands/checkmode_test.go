package commands

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDetectMode(t *testing.T) {
	const deploy = "olmv1-system/cos-externalizer"
	tests := map[string]struct {
		in   installation
		want installMode
		// says is in the mode's sentence; advice in its advice on an untrusted certificate and an
		// empty bundle; not in neither.
		says, advice, not string
	}{
		"cert-manager (config/default)": {
			in:   installation{Deployment: deploy, Args: []string{"--leader-elect", "--webhook-cert-source=secret"}, InjectFrom: "olmv1-system/cos-externalizer-serving-cert"},
			want: installMode{Cert: certManager, Rollout: "auto", CertSecret: "cos-externalizer-webhook-cert", InjectFrom: "olmv1-system/cos-externalizer-serving-cert"},
			says: "cert-manager issues the serving certificate", advice: "Certificate olmv1-system/cos-externalizer-serving-cert is Ready", not: "self-signed",
		},
		"self-signed (config/self-signed)": {
			in:   installation{Deployment: deploy, Args: []string{"--webhook-cert-source", "self-signed"}},
			want: installMode{Cert: certSelfSigned, Rollout: "auto", CertSecret: "cos-externalizer-webhook-ca"},
			says: "self-signed: the manager keeps its CA", advice: "leader Lease", not: "cert-manager",
		},
		"webhook-only (config/webhook-only)": {
			in:   installation{Deployment: deploy, Args: []string{"--webhook-cert-source=secret", "--rollout=false"}, InjectFrom: "olmv1-system/c"},
			want: installMode{Cert: certManager, Rollout: "false", CertSecret: "cos-externalizer-webhook-cert", InjectFrom: "olmv1-system/c"},
			says: "Mode: webhook-only (--rollout=false", advice: "cainjector", not: "self-signed",
		},
		"a Secret of one's own": {
			in:   installation{Deployment: deploy, Args: []string{"--webhook-cert-source=secret", "--webhook-cert-secret=mine", "--rollout=true"}},
			want: installMode{Cert: certSecret, Rollout: "true", CertSecret: "mine"},
			says: "certificate of Secret mine", advice: "Secret mine", not: "cert-manager",
		},
		"files (the default source)": {
			in:   installation{Deployment: deploy, Args: []string{"--leader-elect"}},
			want: installMode{Cert: certDir, Rollout: "auto"},
			says: "--webhook-cert-dir", advice: "--webhook-cert-dir", not: "cert-manager",
		},
		"both injectors": {
			in: installation{Deployment: deploy, Args: []string{"--webhook-cert-source=self-signed"}, InjectFrom: "ns/c"},
			want: installMode{Cert: certSelfSigned, Rollout: "auto", CertSecret: "cos-externalizer-webhook-ca", InjectFrom: "ns/c",
				Conflict: "the manager injects its own CA (--webhook-cert-source=self-signed) and the webhook configurations ask cert-manager to inject Certificate ns/c's: the two overwrite each other. Keep one: remove the annotation cert-manager.io/inject-ca-from, or install the cert-manager overlay."},
			says: "self-signed", advice: "leader Lease",
		},
		"no Deployment, the annotation": {
			in:   installation{InjectFrom: "ns/c"},
			want: installMode{Cert: certManager, InjectFrom: "ns/c"},
			says: "Mode: cert-manager issues", advice: "Certificate ns/c", not: "rolls",
		},
		"no Deployment, the self-signed CA (a manager run elsewhere)": {
			in:   installation{CACommonName: "cos-externalizer-webhook-ca"},
			want: installMode{Cert: certSelfSigned},
			says: "self-signed", advice: "leader Lease", not: "cert-manager",
		},
		"make run: its CA, called by URL": {
			in:   installation{CACommonName: "cos-externalizer-localcluster-ca", URL: "https://127.0.0.1:9443"},
			want: installMode{Cert: certDir, URL: "https://127.0.0.1:9443", LocalCluster: true},
			says: "make run's manager, outside the cluster at https://127.0.0.1:9443, serves the certificate files of --webhook-cert-dir", advice: "--webhook-cert-dir", not: "cert-manager",
		},
		"called by URL, a CA not known": {
			in:   installation{CACommonName: "my-ca", URL: "https://10.0.0.1:9443"},
			want: installMode{URL: "https://10.0.0.1:9443"},
			says: "the webhooks are called by URL (https://10.0.0.1:9443), not through a Service", advice: "With cert-manager", not: "make run",
		},
		"nothing known": {
			in:   installation{CACommonName: "my-ca"},
			want: installMode{},
			says: "is not known", advice: "With cert-manager",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := detectMode(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("mode (-want +got):\n%s", diff)
			}
			if s := got.describe(); !strings.Contains(s, tc.says) || tc.not != "" && strings.Contains(s, tc.not) {
				t.Errorf("describe = %q, want %q in it and not %q", s, tc.says, tc.not)
			}
			advice := got.untrusted()
			if !strings.Contains(advice, tc.advice) || tc.not != "" && strings.Contains(advice, tc.not) {
				t.Errorf("untrusted = %q, want %q in it and not %q", advice, tc.advice, tc.not)
			}
			if e := got.emptyBundle(); tc.not != "" && strings.Contains(e, tc.not) {
				t.Errorf("emptyBundle = %q holds %q", e, tc.not)
			}
		})
	}
}

func TestArgValue(t *testing.T) {
	args := []string{"--a=1", "--b", "2", "--c", "--rollout=false", "--d"}
	for flag, want := range map[string]string{"--a": "1", "--b": "2", "--rollout": "false", "--d": "", "--e": "", "--c": "--rollout=false"} {
		if got := argValue(args, flag); got != want {
			t.Errorf("argValue(%s) = %q, want %q", flag, got, want)
		}
	}
}

// TestCheckCallers: check warns when the manager's Deployment runs without --webhook-client-ca (its
// webhook port accepts unauthenticated callers), says ok with it, and says nothing without a
// Deployment to read.
func TestCheckCallers(t *testing.T) {
	const deploy = "olmv1-system/cos-externalizer"
	tests := map[string]struct {
		in   installation
		want []Finding
	}{
		"no client CA": {in: installation{Deployment: deploy, Args: []string{"--leader-elect"}},
			want: []Finding{{Check: "callers", Result: resultWarn}}},
		"client CA": {in: installation{Deployment: deploy, Args: []string{"--webhook-client-ca=/etc/cos-externalizer/webhook-client-ca/ca.crt"}},
			want: []Finding{{Check: "callers", Result: resultOK}}},
		"client CA and names, flag and value apart": {in: installation{Deployment: deploy, Args: []string{"--webhook-client-ca", "/ca.crt", "--webhook-client-names=front-proxy-client"}},
			want: []Finding{{Check: "callers", Result: resultOK}}},
		"no Deployment": {in: installation{InjectFrom: "olmv1-system/cos-externalizer-serving-cert"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := &checker{o: &checkOptions{output: "json"}}
			c.callers(tc.in)
			var got []Finding
			for _, f := range c.findings {
				got = append(got, Finding{Check: f.Check, Result: f.Result})
				switch {
				case f.Result == resultWarn && !strings.Contains(f.Message, "accepts unauthenticated callers"):
					t.Errorf("the warning does not say the port is open: %s", f.Message)
				case f.Result == resultOK && !strings.Contains(f.Message, "/ca.crt"):
					t.Errorf("the finding does not name the bundle: %s", f.Message)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			if c.fails != 0 {
				t.Errorf("%d failures: an open port is a warning", c.fails)
			}
		})
	}
}
