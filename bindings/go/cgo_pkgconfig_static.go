//go:build redlock_pkgconfig && !redlock_inrepo && redlock_static

package redquorum

// Static build against an installed libredlock (-tags redlock_pkgconfig,redlock_static):
// pkg-config --static gives the include and library directories and the system libraries
// libredlock.a needs; libredlock.a is named first, so it provides every symbol, and
// --as-needed keeps the -lredlock that pkg-config also lists from adding a run-time
// dependency on libredlock.so.

// #cgo pkg-config: --static redlock
// #cgo LDFLAGS: -l:libredlock.a -Wl,--as-needed
import "C"
