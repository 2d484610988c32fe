// Command gomodzip writes a Go module as a module proxy serves it, the zip made with
// golang.org/x/mod/zip, so that GOPROXY=file://OUTDIR serves it:
//
//	gomodzip DIR VERSION OUTDIR
//
// DIR holds the module's go.mod; the files written are
// OUTDIR/<module path>/@v/VERSION.zip, VERSION.mod and VERSION.info, and the version is added
// to OUTDIR/<module path>/@v/list. scripts/go-module-zip runs it.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: gomodzip DIR VERSION OUTDIR")
		os.Exit(2)
	}
	if err := write(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "gomodzip:", err)
		os.Exit(1)
	}
}

func write(dir, version, out string) error {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return fmt.Errorf("%s names no module", filepath.Join(dir, "go.mod"))
	}
	if err := module.Check(path, version); err != nil {
		return err
	}
	if version != module.CanonicalVersion(version) {
		return fmt.Errorf("version %q is not canonical: write it as %q", version, module.CanonicalVersion(version))
	}
	escPath, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	at := filepath.Join(out, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	zipPath := filepath.Join(at, escVersion+".zip")
	f, err := os.Create(zipPath)
	if err != nil {
		return err
	}
	if err := zip.CreateFromDir(f, module.Version{Path: path, Version: version}, dir); err != nil {
		f.Close()
		return fmt.Errorf("zipping %s: %w", dir, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, escVersion+".mod"), gomod, 0o644); err != nil {
		return err
	}
	info, err := json.Marshal(struct{ Version, Time string }{version, time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, escVersion+".info"), info, 0o644); err != nil {
		return err
	}
	list, err := os.ReadFile(filepath.Join(at, "list"))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	versions := strings.Fields(string(list))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	if err := os.WriteFile(filepath.Join(at, "list"), []byte(strings.Join(versions, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	st, err := os.Stat(zipPath)
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s: %s (%.1f MB)\n", path, version, zipPath, float64(st.Size())/1e6)
	return nil
}
