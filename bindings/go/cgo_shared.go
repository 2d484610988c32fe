//go:build !redlock_static

package redlock

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #cgo LDFLAGS: -L${SRCDIR}/../../target/release -lredlock -Wl,-rpath,${SRCDIR}/../../target/release
import "C"
