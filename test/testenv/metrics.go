package testenv

import (
	"bufio"
	"io"
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
