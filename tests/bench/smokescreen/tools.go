//go:build tools

// Package tools pins smokescreen's main package for build.sh; nothing here is compiled
// into a binary of its own.
package tools

import _ "github.com/stripe/smokescreen"
