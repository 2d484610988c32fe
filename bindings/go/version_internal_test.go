package redquorum

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestCompatible(t *testing.T) {
	for _, tc := range []struct {
		lib, header string
		ok          bool
	}{
		{"0.1.0", "0.1.0", true},
		{"0.1.7", "0.1.0", true},
		{"0.1.0", "0.1.3", true},  // patches only fix
		{"0.2.0", "0.1.0", false}, // 0.x minors may break
		{"0.1.0", "0.2.0", false},
		{"1.0.0", "0.1.0", false},
		{"1.3.0", "1.2.9", true},
		{"1.2.0", "1.3.0", false}, // lacks what the header declares
		{"2.0.0", "1.0.0", false},
		{"", "0.1.0", false},
		{"garbage", "0.1.0", false},
		{"0.x.0", "0.1.0", false},
	} {
		err := compatible(tc.lib, tc.header)
		if (err == nil) != tc.ok {
			t.Errorf("compatible(%q, %q) = %v, want ok %v", tc.lib, tc.header, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), tc.lib) || !strings.Contains(err.Error(), tc.header)) {
			t.Errorf("compatible(%q, %q) = %v: want ErrVersion naming both versions", tc.lib, tc.header, err)
		}
	}
}

// New refuses to run with a library of another version; the check runs once per process.
func TestNewChecksLibraryVersion(t *testing.T) {
	real := libraryVersion
	defer func() {
		libraryVersion = real
		versionOnce, versionErr = sync.Once{}, nil
	}()
	libraryVersion = func() string { return "9.0.0" }
	versionOnce, versionErr = sync.Once{}, nil
	c, err := New([]string{"redis://127.0.0.1:1"})
	if c != nil || !errors.Is(err, ErrVersion) {
		t.Fatalf("New with libredlock 9.0.0 = %v, %v; want ErrVersion", c, err)
	}
	if !strings.Contains(err.Error(), "9.0.0") || !strings.Contains(err.Error(), headerVersion) {
		t.Errorf("error %q does not name both versions", err)
	}
	if headerVersion != real() {
		t.Errorf("the header says %q, the library %q: the tests should run against a matching pair", headerVersion, real())
	}
}
