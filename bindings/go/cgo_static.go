//go:build redlock_static

package redlock

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #cgo LDFLAGS: -L${SRCDIR}/../../target/release -l:libredlock.a -lm -ldl -lpthread
import "C"
