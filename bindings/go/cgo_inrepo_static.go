//go:build redlock_inrepo && redlock_static

package redquorum

// In-repository static build (-tags redlock_inrepo,redlock_static): ../../target/release/libredlock.a.

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #cgo LDFLAGS: -L${SRCDIR}/../../target/release -l:libredlock.a -lm -ldl -lpthread
import "C"
