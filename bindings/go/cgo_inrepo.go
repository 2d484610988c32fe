//go:build redlock_inrepo && !redlock_static

package redquorum

// In-repository build (-tags redlock_inrepo), used by the repository's own tests: the header
// from ../../include and the shared library from ../../target/release (cargo build --release),
// with an rpath to it.

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #cgo LDFLAGS: -L${SRCDIR}/../../target/release -lredlock -Wl,-rpath,${SRCDIR}/../../target/release
import "C"
