//go:build redquorum_includebuild

package redquorum

// Never built (no one sets the tag): `go mod vendor` copies the packages a module imports
// under any build tag, and through these imports it copies the folders under build/ that
// hold the prebuilt library and header, without which a vendored build cannot link.
import (
	_ "github.com/redquorum/redquorum/bindings/go/build/include"
	_ "github.com/redquorum/redquorum/bindings/go/build/linux-x86_64"
)
