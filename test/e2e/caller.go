package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// CallerProbe is what a webhook server did with one caller: answered it (Status is the HTTP status;
// any status counts, the path being none of the webhooks') or refused it (Refusal says how: a TLS
// alert, or the connection closed after the handshake without an answer).
type CallerProbe struct {
	Answered bool
	Status   int
	Refusal  error
}

// ProbeCaller sends one HTTP request over conn (which it closes), as a caller presenting certs (none:
// a caller without a client certificate), and says whether the server answered it. The verdict does
// not depend on how fast anything is: the server was reached once it presented its certificate or sent
// a TLS alert, and from then on only an HTTP answer counts as answered. An error means the server was
// not reached (the connection failed before either), which says nothing about the caller: the check
// that uses it fails as unable to tell, rather than reading it as a refusal.
func ProbeCaller(ctx context.Context, conn net.Conn, certs []tls.Certificate) (CallerProbe, error) {
	defer func() { _ = conn.Close() }()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	tc := tls.Client(conn, &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // the caller is under test, not the server
		Certificates:       certs,
		MinVersion:         tls.VersionTLS12,
	})
	if err := tc.HandshakeContext(ctx); err != nil {
		if isTLSAlert(err) {
			// TLS 1.2: the server refuses the caller within the handshake.
			return CallerProbe{Refusal: err}, nil
		}
		return CallerProbe{}, fmt.Errorf("the TLS handshake did not reach the server (no certificate from it, no alert): %w", err)
	}
	if len(tc.ConnectionState().PeerCertificates) == 0 {
		return CallerProbe{}, errors.New("the server presented no certificate")
	}
	// TLS 1.3: the client's handshake ends before the server has looked at the caller's
	// certificate; a refusal comes as an alert (or a close) in answer to the request.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://webhook/", strings.NewReader("{}"))
	if err != nil {
		return CallerProbe{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Close = true
	if err := req.Write(tc); err != nil {
		return CallerProbe{Refusal: fmt.Errorf("sending the request: %w", err)}, nil
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), req)
	if err != nil {
		return CallerProbe{Refusal: fmt.Errorf("reading the answer: %w", err)}, nil
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	return CallerProbe{Answered: true, Status: resp.StatusCode}, nil
}

// isTLSAlert reports whether err is an alert the peer sent ("remote error: tls: ...").
func isTLSAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// IsTLSAlert reports whether a refusal was a TLS alert from the server (rather than a close).
func (p CallerProbe) IsTLSAlert() bool { return p.Refusal != nil && isTLSAlert(p.Refusal) }

// ProbeTimeout bounds one ProbeCaller: long enough for a loaded machine, short enough that a server
// that never answers ends the check.
const ProbeTimeout = 30 * time.Second
