//go:build cgo && !redlock_inrepo && !redlock_pkgconfig && !(linux && amd64)

package redquorum

// The module carries libredlock.a for linux/amd64 only. Elsewhere the build
// stops on this name, which says what to do: install libredlock (scripts/install in the
// redquorum repository) and build with -tags redlock_pkgconfig.
var _ = redquorum_has_no_prebuilt_libredlock_for_this_platform_install_it_and_build_with_tags_redlock_pkgconfig
