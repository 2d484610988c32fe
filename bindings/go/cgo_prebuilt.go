//go:build !redlock_inrepo && !redlock_pkgconfig

package redquorum

// The default build: the static libredlock.a and redlock.h that a released module carries
// under build/ (scripts/go-module-zip in the redquorum repository puts them there), so that
// `go get` needs only Go and a C compiler. The program needs no libredlock at run time.
// Linked after libredlock.a: the system libraries it needs (rustc --print native-static-libs).

// #cgo CFLAGS: -I${SRCDIR}/build/include
// #cgo linux,amd64 LDFLAGS: -L${SRCDIR}/build/linux-x86_64
// #cgo LDFLAGS: -lredlock -lgcc_s -lutil -lrt -lpthread -lm -ldl
import "C"
