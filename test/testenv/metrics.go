package testenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// SumMetric adds up the samples of Prometheus text exposition in r whose line starts with prefix
// (a metric name, possibly with the opening of its labels) and contains every string of contains.
func SumMetric(r io.Reader, prefix string, contains ...string) (float64, error) {
	sum := 0.0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		for _, c := range contains {
			if !strings.Contains(line, c) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, sc.Err()
}

// ScrapeMetrics returns the Prometheus text a metrics endpoint (a manager's MetricsURL) serves.
func ScrapeMetrics(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	raw, err := io.ReadAll(resp.Body)
	return string(raw), err
}

// APIServerMetrics returns the Prometheus text of the API server's /metrics, read as the admin.
func (e *Environment) APIServerMetrics(ctx context.Context) (string, error) {
	raw, err := e.Clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	return string(raw), err
}
