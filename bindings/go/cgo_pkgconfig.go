//go:build redlock_pkgconfig && !redlock_inrepo && !redlock_static

package redquorum

// An installed libredlock (-tags redlock_pkgconfig), found through pkg-config (redlock.pc,
// from `scripts/install PREFIX` in the redquorum repository). Set PKG_CONFIG_PATH to
// PREFIX/lib/pkgconfig for a prefix pkg-config does not search by default.

// #cgo pkg-config: redlock
import "C"
