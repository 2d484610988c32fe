//go:build !cgo

package redquorum

// The package calls libredlock through cgo. Without cgo (CGO_ENABLED=0, or no C compiler
// found) the build stops on this name, since Go prints no error message of a package's own.
var _ = redquorum_requires_cgo_set_CGO_ENABLED_1_and_a_C_compiler
