//! The C suite in ffi/tests/c: compiled with strict warnings against include/redlock.h, linked
//! once against the shared and once against the static library, run against real nodes, and run
//! once more under valgrind.

#[path = "../../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use support::Cluster;

const CFLAGS: &[&str] = &["-Wall", "-Wextra", "-Werror", "-pedantic", "-g"];

/// The repository's top, where include/, docs/ and examples/ are.
fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Builds libredlock (release) once per test run: `cargo test` does not build a cdylib for a
/// test of its own package.
fn library_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        // Without the variables `cargo test` sets for this process (CARGO_PKG_NAME, OUT_DIR...):
        // ring's build script reruns when they change, so passing them on would rebuild ring,
        // rustls, redis and the library here, and all of it once more at the next plain build.
        const SET_BY_CARGO_TEST: &[&str] = &[
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_MANIFEST_LINKS",
            "CARGO_CRATE_NAME",
            "CARGO_PRIMARY_PACKAGE",
            "OUT_DIR",
            // scripts/run-tests sets it for libtest's --report-time; cargo would rebuild
            // everything under it.
            "RUSTC_BOOTSTRAP",
        ];
        let mut build = Command::new(cargo);
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if name.starts_with("CARGO_PKG_")
                || name.starts_with("CARGO_BIN_EXE_")
                || SET_BY_CARGO_TEST.contains(&&*name)
            {
                build.env_remove(&*name);
            }
        }
        let status = build
            .args(["build", "--release", "-p", "redquorum-ffi"])
            .current_dir(root())
            .status()
            .expect("run cargo build");
        assert!(
            status.success(),
            "cargo build --release -p redquorum-ffi failed"
        );
        let target = std::env::var("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| root().join("target"));
        target.join("release")
    })
}

/// Compiles `source` (under the repository's top) as C11 against the built library.
fn compile(source: &str, name: &str, link_static: bool) -> PathBuf {
    compile_path(&root().join(source), name, link_static, "-std=c11")
}

/// Compiles a program printed in the docs, completed with a `main`, as strict C99 (what the
/// docs promise) against the shared library.
fn compile_program(program: &str, name: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.c"));
    std::fs::write(&source, program).unwrap();
    compile_path(&source, name, false, "-std=c99")
}

fn compile_path(source: &Path, name: &str, link_static: bool, standard: &str) -> PathBuf {
    let lib = library_dir();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.arg(standard)
        .args(CFLAGS)
        .arg("-I")
        .arg(root().join("include"))
        .arg(source)
        .arg("-o")
        .arg(&out);
    if link_static {
        cc.arg(lib.join("libredlock.a"))
            .args(["-lpthread", "-ldl", "-lm"]);
    } else {
        cc.arg("-L")
            .arg(lib)
            .arg("-lredlock")
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .arg("-lpthread");
    }
    let output = cc.output().expect("run cc");
    assert!(
        output.status.success(),
        "cc failed for {}:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// Runs a C test binary (through `wrapper` when given) and checks its "N passed, 0 failed".
fn run(wrapper: &[&str], binary: &Path, mode: &str, urls: &[String], env: &[(&str, &str)]) {
    let mut command = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(binary);
            c
        }
        None => Command::new(binary),
    };
    // cargo test points LD_LIBRARY_PATH at target/debug, whose libredlock.so may be stale; the
    // binaries find the fresh release build through their rpath.
    let output = command
        .env_remove("LD_LIBRARY_PATH")
        .arg(mode)
        .args(urls)
        .envs(env.iter().copied())
        .output()
        .expect("run C test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(" passed, 0 failed"),
        "{} {mode} failed ({}):\n{stdout}\n{stderr}",
        binary.display(),
        output.status
    );
    println!("{} {mode}: {}", binary.display(), stdout.trim());
}

/// Runs the suite's "all" cases on a fresh cluster, then "no-quorum" after killing a majority.
///
/// A cluster per run: a run's last releases may still be on their way when its process exits
/// (a quorum call returns before every node has answered), so a second run on the same nodes
/// could find its resources held by the first.
fn run_suite(wrapper: &[&str], binary: &Path, env: &[(&str, &str)]) {
    let mut cluster = Cluster::start(5);
    run(wrapper, binary, "all", &cluster.urls(), env);
    for i in 0..3 {
        cluster.nodes[i].kill();
    }
    run(wrapper, binary, "no-quorum", &cluster.urls(), env);
}

/// Compiles the C suite `source` linked both ways and runs the two at once, each on nodes of
/// its own (they mostly wait on timers and servers).
fn shared_and_static(source: &str, name: &str) {
    let shared = compile(source, &format!("{name}_shared"), false);
    let fixed = compile(source, &format!("{name}_static"), true);
    std::thread::scope(|s| {
        s.spawn(|| run_suite(&[], &shared, &[]));
        run_suite(&[], &fixed, &[]);
    });
}

/// Runs the C suite `source` under valgrind (see [`valgrind`]), or says it is skipped when
/// valgrind is not installed and `REDLOCK_REQUIRE_VALGRIND` is not set.
fn under_valgrind(source: &str, name: &str) {
    if !valgrind_available() {
        assert!(
            std::env::var_os("REDLOCK_REQUIRE_VALGRIND").is_none(),
            "REDLOCK_REQUIRE_VALGRIND is set but valgrind is not installed"
        );
        eprintln!("SKIPPED: valgrind is not installed (the README's test command installs it)");
        return;
    }
    let shared = compile(source, &format!("{name}_valgrind"), false);
    let wrapper = valgrind("1");
    run_suite(
        &wrapper.iter().map(String::as_str).collect::<Vec<_>>(),
        &shared,
        SLOW,
    );
}

#[test]
fn c_suite_shared_and_static() {
    shared_and_static("ffi/tests/c/test_redlock.c", "test_redlock");
}

fn valgrind_available() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn c_suite_under_valgrind() {
    under_valgrind("ffi/tests/c/test_redlock.c", "test_redlock");
}

/// How the C suites run under valgrind: as docs/c-abi.md tells a user to run a program, with
/// the suppression file scripts/install ships (ffi/valgrind.supp); any error or leak, definite
/// or possible, fails the run.
fn valgrind(exit_code: &str) -> Vec<String> {
    let suppressions = root().join("ffi/valgrind.supp");
    vec![
        "valgrind".into(),
        "--quiet".into(),
        "--leak-check=full".into(),
        format!("--suppressions={}", suppressions.display()),
        format!("--error-exitcode={exit_code}"),
    ]
}

/// Valgrind slows everything down many times: give nodes time to answer.
const SLOW: &[(&str, &str)] = &[("REDLOCK_TEST_NODE_TIMEOUT_MS", "2000")];

/// ffi/tests/c/test_request.c: the request builders and the cancel handle (every setter with bad
/// input, kind x patience x auto-extension through `redlock_request_acquire`, one request
/// acquired again and again and from several threads at once with a cancel handle per call,
/// cancellation from a thread and from a signal handler, a handle freed while a call with it
/// waits), linked both ways.
#[test]
fn c_request_suite_shared_and_static() {
    shared_and_static("ffi/tests/c/test_request.c", "test_request");
}

#[test]
fn c_request_suite_under_valgrind() {
    under_valgrind("ffi/tests/c/test_request.c", "test_request");
}

/// ffi/tests/c/test_election.c: leader election (campaign, resign, the leader snapshot,
/// observers, a waiting candidate woken by a resignation, cancelled campaigns and observers, the
/// callbacks, a leadership found lost, every refused argument), linked both ways.
#[test]
fn c_election_suite_shared_and_static() {
    shared_and_static("ffi/tests/c/test_election.c", "test_election");
}

#[test]
fn c_election_suite_under_valgrind() {
    under_valgrind("ffi/tests/c/test_election.c", "test_election");
}

/// ffi/tests/c/test_telemetry.c: the stats snapshot and its Prometheus text, event callbacks
/// with their fields on the dispatcher thread (calling back into the library, a lost lock, a
/// listener freed from another thread and from inside its own callback, a listener outliving
/// its client), every refused argument, linked both ways.
#[test]
fn c_telemetry_suite_shared_and_static() {
    shared_and_static("ffi/tests/c/test_telemetry.c", "test_telemetry");
}

#[test]
fn c_telemetry_suite_under_valgrind() {
    under_valgrind("ffi/tests/c/test_telemetry.c", "test_telemetry");
}

#[test]
fn c_example_builds_with_the_readme_line_and_runs() {
    let example = compile("examples/c/example.c", "example", false);
    let cluster = Cluster::start(1);
    let output = Command::new(&example)
        .env_remove("LD_LIBRARY_PATH")
        .arg(&cluster.urls()[0])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.starts_with("holding orders:42 for "), "{stdout}");
    assert_eq!(cluster.nodes[0].get("orders:42"), None, "released");
}

/// Compiles a file that includes the header as `standard` with strict warnings as errors.
fn compile_header_as(compiler: &str, standard: &str, source: &Path) {
    let object = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("header-{standard}.o"));
    let output = Command::new(compiler)
        .args([
            standard,
            "-Wall",
            "-Wextra",
            "-pedantic",
            "-Werror",
            "-c",
            "-I",
        ])
        .arg(root().join("include"))
        .arg(source)
        .arg("-o")
        .arg(&object)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {compiler} ({e}); scripts/test installs gcc and g++ when missing")
        });
    assert!(
        output.status.success(),
        "include/redlock.h does not compile cleanly with {compiler} {standard}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The header says it needs C99 or C++11: hold it to that, warnings included.
#[test]
fn header_compiles_as_strict_c99_and_cpp11() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let program = "#include \"redlock.h\"\n\
        int main(void) {\n\
            redlock_options *o = 0;\n\
            redlock_status st = redlock_options_new(&o, 0);\n\
            redlock_options_free(o);\n\
            return st == REDLOCK_OK && redlock_version() != 0 ? 0 : 1;\n\
        }\n";
    let c = dir.join("header_c99.c");
    let cpp = dir.join("header_cpp11.cpp");
    std::fs::write(&c, program).unwrap();
    std::fs::write(&cpp, program.replace("(void)", "()")).unwrap();
    compile_header_as("cc", "-std=c99", &c);
    compile_header_as("c++", "-std=c++11", &cpp);
    // The example is what users copy: it must be plain C99 too.
    compile_header_as("cc", "-std=c99", &root().join("examples/c/example.c"));
}

/// The names the shared library exports, from `nm -D --defined-only`.
fn exported_symbols(library: &Path) -> Vec<String> {
    let output = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(library)
        .output()
        .expect("run nm (binutils)");
    assert!(
        output.status.success(),
        "nm failed on {}",
        library.display()
    );
    let mut names: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2).map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// An accidental removal (or rename) of an exported function fails here, and so does an export
/// that was added without being recorded in include/redlock.symbols; each exported function is
/// declared in the header, and the library carries the SONAME of its major version.
#[test]
fn exported_symbols_match_the_committed_list_and_the_soname() {
    let library = library_dir().join("libredlock.so");
    let exported = exported_symbols(&library);
    let listed_text = std::fs::read_to_string(root().join("include/redlock.symbols")).unwrap();
    let listed: Vec<&str> = listed_text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let missing: Vec<&str> = listed
        .iter()
        .copied()
        .filter(|name| !exported.iter().any(|e| e == name))
        .collect();
    let unlisted: Vec<&String> = exported
        .iter()
        .filter(|name| !listed.contains(&name.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "libredlock.so no longer exports {missing:?}: removing or renaming a function breaks \
         every program linked against it (docs/c-abi.md, \"Versions\")"
    );
    assert!(
        unlisted.is_empty(),
        "libredlock.so exports {unlisted:?}, which include/redlock.symbols does not list: add \
         them (sorted) if they are new API"
    );
    let mut sorted = listed.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        listed, sorted,
        "include/redlock.symbols: keep it sorted, no duplicates"
    );
    let header = std::fs::read_to_string(root().join("include/redlock.h")).unwrap();
    for name in &listed {
        let declared = header.match_indices(&format!("{name}(")).any(|(at, _)| {
            let before = header[..at].chars().next_back();
            !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        assert!(
            declared,
            "{name} is exported but not declared in include/redlock.h"
        );
    }

    let output = Command::new("readelf")
        .args(["-d"])
        .arg(&library)
        .output()
        .expect("run readelf (binutils)");
    let dynamic = String::from_utf8_lossy(&output.stdout);
    let major = env!("CARGO_PKG_VERSION_MAJOR");
    assert!(
        dynamic.contains(&format!("Library soname: [libredlock.so.{major}]")),
        "libredlock.so has no SONAME libredlock.so.{major}:\n{dynamic}"
    );
}

/// The README's C snippet, as printed: it compiles as strict C99 and frees everything on the
/// success path and on the error path (checked by valgrind when it is installed).
#[test]
fn readme_c_snippet_is_leak_free_on_success_and_on_error() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = &readme[readme.find("\n## C\n").expect("README has a C section")..];
    let start = section.find("```c\n").expect("a ```c block") + "```c\n".len();
    let snippet = &section[start..start + section[start..].find("```").unwrap()];
    assert!(snippet.contains("int lock_orders("), "{snippet}");
    let program = format!(
        "{snippet}\nint main(int argc, char **argv) {{\n    \
         return lock_orders((const char *const *)&argv[1], (size_t)(argc - 1));\n}}\n"
    );
    let binary = compile_program(&program, "readme_snippet");
    let valgrind = if valgrind_available() {
        valgrind("99")
    } else {
        Vec::new()
    };
    let run = |url: &str| {
        let mut command = match valgrind.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&binary);
                c
            }
            None => Command::new(&binary),
        };
        command
            .env_remove("LD_LIBRARY_PATH")
            .arg(url)
            .output()
            .unwrap()
    };
    let cluster = Cluster::start(1);
    let ok = run(&cluster.urls()[0]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "success path:\n{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(cluster.nodes[0].get("orders:42"), None, "released");
    // A node that is not there: the client is created, the lock fails with an error that the
    // snippet prints and frees along with everything else (valgrind would exit with 99).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let failed = run(&format!("redis://127.0.0.1:{port}"));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(1), "error path:\n{stderr}");
    assert!(stderr.contains("redlock: "), "{stderr}");
}

/// The request + cancel example of docs/c-abi.md, as printed: strict C99, and it takes, reports
/// and releases its fenced lock on a real node.
#[test]
fn c_abi_doc_request_example_compiles_and_runs() {
    let doc = std::fs::read_to_string(root().join("docs/c-abi.md")).unwrap();
    let section = &doc[doc
        .find("\n## Requests and cancellation\n")
        .expect("docs/c-abi.md has the requests section")..];
    // The section's second ```c block: the first lists the declarations.
    let mut blocks = section.split("```c\n").skip(1);
    let example = blocks.nth(1).expect("a second ```c block");
    let example = &example[..example.find("```").unwrap()];
    assert!(
        example.contains("int lock_orders_interruptibly("),
        "{example}"
    );
    let program = format!(
        "{example}\nint main(int argc, char **argv) {{\n    \
         redlock_client *client = NULL;\n    \
         if (argc != 2 || redlock_client_new((const char *const *)&argv[1], 1, NULL, &client, \
         NULL) != REDLOCK_OK)\n        return 2;\n    \
         int rc = lock_orders_interruptibly(client);\n    \
         redlock_client_free(client);\n    return rc;\n}}\n"
    );
    let binary = compile_program(&program, "doc_request_example");
    let cluster = Cluster::start(1);
    let run = Command::new(&binary)
        .env_remove("LD_LIBRARY_PATH")
        .arg(&cluster.urls()[0])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.starts_with("holding orders:42 with fence "),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(cluster.nodes[0].get("orders:42"), None, "released");
}

/// The election example of docs/c-abi.md, as printed: strict C99, and it leads, reports its
/// term, resigns (the stopped-leading callback says so) and leaves no key behind.
#[test]
fn c_abi_doc_election_example_compiles_and_runs() {
    let doc = std::fs::read_to_string(root().join("docs/c-abi.md")).unwrap();
    let section = &doc[doc
        .find("\n## Leader election\n")
        .expect("docs/c-abi.md has the election section")..];
    // The section's second ```c block: the first lists the declarations.
    let mut blocks = section.split("```c\n").skip(1);
    let example = blocks.nth(1).expect("a second ```c block");
    let example = &example[..example.find("```").unwrap()];
    assert!(example.contains("int lead_scheduler_once("), "{example}");
    let program = format!(
        "{example}\nint main(int argc, char **argv) {{\n    \
         redlock_client *client = NULL;\n    \
         if (argc != 2 || redlock_client_new((const char *const *)&argv[1], 1, NULL, &client, \
         NULL) != REDLOCK_OK)\n        return 2;\n    \
         int rc = lead_scheduler_once(client);\n    \
         redlock_client_free(client);\n    return rc;\n}}\n"
    );
    let binary = compile_program(&program, "doc_election_example");
    let cluster = Cluster::start(1);
    let run = Command::new(&binary)
        .env_remove("LD_LIBRARY_PATH")
        .arg(&cluster.urls()[0])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let term = stdout
        .strip_prefix("leading in term ")
        .and_then(|rest| rest.lines().next())
        .unwrap_or_else(|| panic!("{stdout}{}", String::from_utf8_lossy(&run.stderr)));
    assert!(
        run.status.success() && stdout.contains(&format!("no longer leading in term {term}\n")),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        cluster.nodes[0].get("redlock:election:scheduler"),
        None,
        "resigned"
    );
}

/// The function declarations that docs/c-abi.md prints (in its ```c blocks other than the
/// complete programs), comments and preprocessor lines left out, each as one line.
fn documented_prototypes() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(root().join("docs/c-abi.md")).unwrap();
    let mut prototypes = Vec::new();
    for block in doc.split("```c\n").skip(1) {
        let block = &block[..block.find("\n```").expect("a closed ```c block")];
        if block.contains("#include") {
            continue; // a complete program: the tests above compile and run those
        }
        let mut code = String::new();
        let mut rest = block;
        while let Some(start) = rest.find("/*") {
            code.push_str(&rest[..start]);
            rest = &rest[start + rest[start..].find("*/").expect("a closed comment") + 2..];
        }
        code.push_str(rest);
        let code: Vec<&str> = code
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect();
        for statement in code.join("\n").split(';') {
            let statement = statement.split_whitespace().collect::<Vec<_>>().join(" ");
            if statement.starts_with("typedef") || statement.contains(['{', '}']) {
                continue;
            }
            let Some(open) = statement.find('(') else {
                continue;
            };
            let name = statement[..open]
                .trim_end()
                .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .next()
                .unwrap();
            if name.starts_with("redlock_") {
                prototypes.push((name.to_owned(), format!("{statement};")));
            }
        }
    }
    prototypes
}

/// Every function docs/c-abi.md declares is the header's, with the header's types: the
/// declarations, as printed, compile beside include/redlock.h (C rejects a second declaration
/// of a function with other types), and each names a function the header declares.
#[test]
fn c_abi_doc_declarations_match_the_header() {
    let prototypes = documented_prototypes();
    assert!(
        prototypes.len() >= 100,
        "only {} declarations found in docs/c-abi.md",
        prototypes.len()
    );
    let header = std::fs::read_to_string(root().join("include/redlock.h")).unwrap();
    for (name, prototype) in &prototypes {
        let declared = header.match_indices(&format!("{name}(")).any(|(at, _)| {
            let before = header[..at].chars().next_back();
            !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        assert!(
            declared,
            "docs/c-abi.md declares {name}, which include/redlock.h does not:\n{prototype}"
        );
    }
    let lines: Vec<&str> = prototypes.iter().map(|(_, p)| p.as_str()).collect();
    let source = Path::new(env!("CARGO_TARGET_TMPDIR")).join("doc_declarations.c");
    std::fs::write(
        &source,
        format!("#include \"redlock.h\"\n{}\n", lines.join("\n")),
    )
    .unwrap();
    let object = source.with_extension("o");
    let output = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .arg("-std=c99")
        .args(CFLAGS)
        .args(["-c", "-I"])
        .arg(root().join("include"))
        .arg(&source)
        .arg("-o")
        .arg(&object)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "a declaration of docs/c-abi.md differs from include/redlock.h's:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
