package redquorum

// #include "redlock.h"
import "C"

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// The library this package was written for: the header it compiled against says which one
// (REDLOCK_VERSION), and the library loaded at run time must be compatible with it. A
// shared libredlock is found at run time, so a program built against one version can meet
// another; calling into it with the wrong ABI could crash or corrupt memory, so New
// refuses instead.

// headerVersion is REDLOCK_VERSION of the header the package compiled against.
const headerVersion = C.REDLOCK_VERSION

// libraryVersion reads the loaded library's version; a variable for the package's tests.
var libraryVersion = func() string { return C.GoString(C.redlock_version()) }

var (
	versionOnce sync.Once
	versionErr  error
)

// checkLibraryVersion compares the loaded library with the header, once per process.
func checkLibraryVersion() error {
	versionOnce.Do(func() { versionErr = compatible(libraryVersion(), headerVersion) })
	return versionErr
}

// compatible reports whether a library of version lib serves a program compiled against
// the header of version header, following semantic versioning as docs/c-abi.md states it:
// the same major version and at least the header's minor version (a minor release only
// adds); before 1.0, the same minor version, since 0.x minors may break.
func compatible(lib, header string) error {
	lmaj, lmin, lok := majorMinor(lib)
	hmaj, hmin, hok := majorMinor(header)
	ok := lok && hok && lmaj == hmaj && lmin >= hmin && (hmaj != 0 || lmin == hmin)
	if ok {
		return nil
	}
	return &Error{
		Status: StatusInvalidArgument,
		Message: fmt.Sprintf("libredlock %q is loaded, but this Go package was built against redlock.h %q "+
			"and needs a compatible library (the same major version, and the same minor version before 1.0): "+
			"install a matching libredlock or rebuild against the installed one", lib, header),
		causes: []error{ErrVersion},
	}
}

func majorMinor(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil && major >= 0 && minor >= 0
}

// Version returns the version of the libredlock the program is linked with.
func Version() string {
	return libraryVersion()
}
