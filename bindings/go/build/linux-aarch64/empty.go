// Package linux_aarch64 holds, in a released module, the libredlock.a of linux/arm64 that
// the package redquorum links by default (scripts/go-module-zip in the redquorum repository
// puts it here). It has no Go code: this file makes the folder a package, so that
// `go mod vendor` copies it (includebuild.go imports it).
package linux_aarch64
