// Package include holds, in a released module, the redlock.h that the package redquorum
// includes (scripts/go-module-zip in the redquorum repository puts it here). It has no Go
// code: this file makes the folder a package, so that `go mod vendor` copies it
// (includebuild.go imports it).
package include
