//! The names table of docs/api.md ("The names in each language") against the public names of
//! Rust (the `pub fn`s of the client, request, lock and election types in `src/`) and of C
//! (`include/redlock.symbols`): a public name in no row, or a name in the table that is not
//! public, fails. Python and Go check their own columns (bindings/python/tests/test_api_names.py,
//! bindings/go/api_names_test.go).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

const TYPES: [&str; 5] = ["Redlock", "LockRequest", "Lock", "Election", "Leadership"];
const C_SURFACES: [&str; 5] = [
    "redlock_client_",
    "redlock_request_",
    "redlock_lock_",
    "redlock_election_",
    "redlock_leadership_",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The names in `language`'s column of the table, after checking that every cell of every row
/// holds names or a `—` exception with its reason.
fn table_column(language: &str) -> BTreeSet<String> {
    let api = fs::read_to_string(root().join("docs/api.md")).expect("reading docs/api.md");
    let section = api
        .split("\n## ")
        .find(|s| s.starts_with("The names in each language"))
        .expect("docs/api.md has a section \"The names in each language\"");
    let mut names = BTreeSet::new();
    let mut column = None;
    let mut rows = 0;
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        if cells[0] == "concept" {
            column = Some(
                cells
                    .iter()
                    .position(|c| *c == language)
                    .unwrap_or_else(|| panic!("a table of docs/api.md has no column {language}")),
            );
            continue;
        }
        if cells[0].starts_with("---") {
            continue;
        }
        let col = column.expect("a header row before the rows");
        for (i, cell) in cells.iter().enumerate().skip(1) {
            if let Some(reason) = cell.strip_prefix('—') {
                assert!(
                    !reason.trim().is_empty(),
                    "docs/api.md, row {:?}: an exception without its reason",
                    cells[0]
                );
            } else {
                let in_cell: Vec<String> = cell
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_owned)
                    .collect();
                assert!(
                    !in_cell.is_empty(),
                    "docs/api.md, row {:?}: a cell with neither names nor an exception",
                    cells[0]
                );
                if i == col {
                    names.extend(in_cell);
                }
            }
        }
        rows += 1;
    }
    assert!(rows > 0, "docs/api.md: the names tables have no rows");
    names
}

fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("reading src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `Type::name` for each `pub fn` (not `#[doc(hidden)]`) of an `impl Type {` block of the
/// surface's types in `src/`.
fn rust_public() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_sources(&root().join("src"), &mut files);
    let mut names = BTreeSet::new();
    for file in files {
        let text = fs::read_to_string(&file).expect("reading a source file");
        let mut current: Option<&str> = None;
        let mut hidden = false;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("impl ") {
                current = TYPES
                    .iter()
                    .find(|t| rest.starts_with(&format!("{t} {{")))
                    .copied();
                continue;
            }
            if line == "}" {
                current = None;
            }
            let Some(ty) = current else { continue };
            let item = line.trim_start();
            if item.starts_with("#[doc(hidden)]") {
                hidden = true;
            } else if let Some(rest) = line.strip_prefix("    pub fn ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !hidden {
                    names.insert(format!("{ty}::{name}"));
                }
                hidden = false;
            } else if !(item.starts_with("///") || item.starts_with("#[")) {
                hidden = false;
            }
        }
    }
    names
}

fn c_public() -> BTreeSet<String> {
    let symbols = fs::read_to_string(root().join("include/redlock.symbols"))
        .expect("reading include/redlock.symbols");
    symbols
        .lines()
        .filter(|l| C_SURFACES.iter().any(|p| l.starts_with(p)))
        .map(str::to_owned)
        .collect()
}

fn compare(language: &str, public: BTreeSet<String>) {
    let table = table_column(language);
    let missing: Vec<_> = public.difference(&table).collect();
    let stale: Vec<_> = table.difference(&public).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/api.md, \"The names in each language\", column {language}: public names in no \
         row (add a row, or the name to its concept's row, with the other languages' \
         counterparts or a `—` exception): {missing:?}; names in the table that are not \
         public: {stale:?}"
    );
}

#[test]
fn every_public_rust_name_has_a_row_in_the_names_table() {
    let public = rust_public();
    assert!(
        public.contains("Redlock::acquire"),
        "the parse of src/ found no Redlock::acquire: {public:?}"
    );
    compare("Rust", public);
}

#[test]
fn every_c_symbol_of_the_surfaces_has_a_row_in_the_names_table() {
    compare("C", c_public());
}
