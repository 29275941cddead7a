// Package monitoring reads what config/prometheus and config/grafana hold: the metric names their
// PromQL expressions read, the alerting rules, the runbook sections the alerts link to, and the
// queries of the Grafana dashboard (generated from its spec by hack/gen/dashboardgen).
package monitoring

import (
	"fmt"
	"slices"
	"strings"
)

// keywords are PromQL words that are not metric names: aggregation operators (a metric named like
// one would need {__name__="..."}), binary and grouping modifiers, and literals.
var keywords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true,
	"limit_ratio": true, "by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
	"group_right": true, "bool": true, "and": true, "or": true, "unless": true, "offset": true,
	"atan2": true, "inf": true, "nan": true,
}

// grouping keywords are followed by a parenthesised list of label names.
var grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// MetricNames returns the metric names expr selects, sorted and once each: every identifier that is
// neither a function (followed by "("), a keyword, a label (inside {...} or a grouping's (...)),
// nor a Grafana variable ($name, ${name}). It checks only that strings, braces and brackets close;
// it is no PromQL parser.
func MetricNames(expr string) ([]string, error) {
	var names []string
	i := 0
	for i < len(expr) {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{' || c == '[':
			end, err := skipGroup(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '}' || c == ']':
			return nil, fmt.Errorf("unbalanced %q at %d", c, i)
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				end, err := skipGroup(expr, i)
				if err != nil {
					return nil, err
				}
				i = end
				continue
			}
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			start := i
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
			word := expr[start:i]
			next := i
			for next < len(expr) && strings.ContainsRune(" \t\r\n", rune(expr[next])) {
				next++
			}
			switch {
			case grouping[word] && next < len(expr) && expr[next] == '(':
				end := strings.IndexByte(expr[next:], ')')
				if end < 0 {
					return nil, fmt.Errorf("unclosed %s( at %d", word, next)
				}
				i = next + end + 1
			case keywords[word], next < len(expr) && expr[next] == '(':
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

func isIdent(c byte, first bool) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

// skipString returns the index after the string literal that starts at i.
func skipString(s string, i int) (int, error) {
	quote := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && quote != '`':
			j++
		case s[j] == quote:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at %d", i)
}

// skipGroup returns the index after the {...} or [...] that starts at i, strings inside included.
func skipGroup(s string, i int) (int, error) {
	closing := map[byte]byte{'{': '}', '[': ']'}[s[i]]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '"', '\'', '`':
			end, err := skipString(s, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case closing:
			return j + 1, nil
		case '{', '[', '}', ']':
			return 0, fmt.Errorf("unexpected %q at %d", s[j], j)
		}
	}
	return 0, fmt.Errorf("unclosed %q at %d", s[i], i)
}
