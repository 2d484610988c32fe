//! Sets the shared library's SONAME and, with the `header` feature (this repository's own
//! builds: scripts/test, and whoever changes ffi/src), regenerates include/redlock.h (at the
//! repository's top) from ffi/src with cbindgen, rewriting it only when its text changes so
//! that an unchanged header keeps its timestamp (and C builds stay up to date). Without the
//! feature the committed header is used as it is, and cbindgen is not compiled at all.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    soname();
    #[cfg(feature = "header")]
    header();
}

#[cfg(feature = "header")]
fn header() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&dir);
    let mut config = cbindgen::Config::from_file(dir.join("cbindgen.toml"))
        .unwrap_or_else(|e| panic!("reading cbindgen.toml: {e}"));
    let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets CARGO_PKG_VERSION");
    config.after_includes = Some(format!("\n#define REDLOCK_VERSION \"{version}\""));
    let bindings = match cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
    {
        Ok(bindings) => bindings,
        Err(e) => panic!("cbindgen could not generate include/redlock.h: {e}"),
    };
    let mut text = Vec::new();
    bindings.write(&mut text);
    let header = dir.join("..").join("include").join("redlock.h");
    if std::fs::read(&header).ok().as_deref() != Some(text.as_slice()) {
        std::fs::create_dir_all(header.parent().expect("include/ has a parent"))
            .expect("create include/");
        std::fs::write(&header, text).expect("write include/redlock.h");
    }
}

/// Gives the shared library the SONAME `libredlock.so.MAJOR` on ELF targets, so that programs
/// record the major version they were linked against (see docs/c-abi.md, "Versions").
fn soname() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let family = std::env::var("CARGO_CFG_TARGET_FAMILY").unwrap_or_default();
    let vendor = std::env::var("CARGO_CFG_TARGET_VENDOR").unwrap_or_default();
    if family.split(',').any(|f| f == "unix") && vendor != "apple" && os != "aix" {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets it");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libredlock.so.{major}");
        dev_symlink(&major);
    }
}

/// A program linked against `target/<profile>/libredlock.so` asks the loader for the SONAME,
/// `libredlock.so.MAJOR`: link that name to the library in the profile directory, as a build
/// tree of a C library has it, so that `-L target/release -lredlock` with an rpath (the Go
/// binding, the examples) keeps working. Best effort: a failure here only affects such
/// programs, which then report the missing file by name.
fn dev_symlink(major: &str) {
    let Some(out_dir) = std::env::var_os("OUT_DIR") else {
        return;
    };
    // OUT_DIR is <target>/<profile>/build/redlock-<hash>/out.
    let Some(profile_dir) = Path::new(&out_dir).ancestors().nth(3) else {
        return;
    };
    if !profile_dir.join("build").is_dir() {
        return;
    }
    let link = profile_dir.join(format!("libredlock.so.{major}"));
    if std::fs::read_link(&link).is_ok_and(|target| target == Path::new("libredlock.so")) {
        return;
    }
    let _ = std::fs::remove_file(&link);
    #[cfg(unix)]
    let _ = std::os::unix::fs::symlink("libredlock.so", &link);
}
