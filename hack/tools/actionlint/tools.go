//go:build tools

// Package tools pins the actionlint command this module builds.
package tools

import _ "github.com/rhysd/actionlint/cmd/actionlint"
