//! Generates include/redlock.h from src/ffi with cbindgen, rewriting it only when its text
//! changes so that an unchanged header keeps its timestamp (and C builds stay up to date).

use std::path::Path;

fn main() {
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
    let header = dir.join("include").join("redlock.h");
    if std::fs::read(&header).ok().as_deref() != Some(text.as_slice()) {
        std::fs::create_dir_all(header.parent().expect("include/ has a parent"))
            .expect("create include/");
        std::fs::write(&header, text).expect("write include/redlock.h");
    }
}
