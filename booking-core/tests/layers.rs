//! The booking core's layers (ARCHITECTURE.md "Booking core layers", STYLE.md "The model inside
//! this repository"): every file under `src/` belongs to a top-level module (`src/db/lease.rs` to
//! `db`), and a module may use `crate::<other>` only when `<other>` sits in a lower layer. Two
//! modules of one layer may not use each other either, so there is no import circle between
//! top-level modules. A path through the crate root (`crate::AppState`) is refused too: it would
//! hide which layer the item comes from.
//!
//! What is read: `crate::` paths in code, including `use crate::{a, b::c}` groups; comments and
//! string literals are skipped (a doc link may point anywhere). `lib.rs` (which wires the layers
//! together) and `main.rs` (the binary) are exempt. `super::` stays inside a top-level module
//! (no file is nested deeper than `src/<module>/<file>.rs`, which `modules_are_at_most_one_folder_deep`
//! keeps true).
//!
//! One more rule read from the same sources: every transaction begins through
//! `db::begin_write` (issue 13 item 2, DECISIONS "Booking core"; on SQLite `BEGIN IMMEDIATE`, so
//! a transaction takes the write lock before its first read and never has to upgrade a read
//! snapshot, which fails at once in WAL mode): a pool's plain `.begin()` outside `db/` fails
//! `every_transaction_begins_as_a_writer`. A savepoint (`Acquire::begin(&mut *tx)`) is not a
//! transaction start and is not matched.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Bottom to top. A module may use only modules of strictly lower layers.
const LAYERS: &[&[&str]] = &[
    &["error", "load", "telemetry", "venue"],
    &["config"],
    &["db"],
    &["door", "gateway"],
    &["outbox"],
    &["inventory"],
    &["state"],
    &["payments"],
    &["http"],
];

/// Files that sit above every layer.
const EXEMPT: &[&str] = &["lib.rs", "main.rs"];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/inventory/claim.rs` → `inventory`; `src/error.rs` → `error`; exempt files → `None`.
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?.to_owned();
    if rel.components().count() == 1 && EXEMPT.contains(&first.as_str()) {
        return None;
    }
    Some(first.trim_end_matches(".rs").to_owned())
}

/// `text` with comments and the contents of string and char literals replaced by spaces
/// (newlines kept, so line numbers stay right).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
                blank(&mut out, i, end);
                i = end;
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let body = i + 2 + hashes;
                let end = text[body..]
                    .find(&close)
                    .map_or(b.len(), |n| body + n + close.len());
                blank(&mut out, i, end);
                i = end;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let end = (j + 1).min(b.len());
                blank(&mut out, i, end);
                i = end;
            }
            b'\'' => {
                // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): only literals are blanked.
                let end = if b.get(i + 1) == Some(&b'\\') {
                    text[i + 2..].find('\'').map(|n| i + 2 + n + 1)
                } else {
                    let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                    (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 2 + ch)
                };
                match end {
                    Some(end) => {
                        blank(&mut out, i, end);
                        i = end;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    String::from_utf8(out).expect("blanking keeps UTF-8 (only ASCII is written over whole chars)")
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first segment after every `crate::` in `code` (already [`code_only`]), with its 1-based
/// line: `crate::db::Tx` → `db`; `crate::{a, b::{c, d}}` → `a`, `b`.
fn crate_refs(code: &str) -> Vec<(usize, String)> {
    let mut refs = Vec::new();
    let mut from = 0;
    while let Some(n) = code[from..].find("crate::") {
        let at = from + n;
        from = at + "crate::".len();
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue; // `booking_crate::`, `$crate::`
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = code[from..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut item_start = true;
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && !c.is_whitespace() => {
                        item_start = false;
                        refs.push((line, ident_at(&group[k..]).to_owned()));
                    }
                    _ => {}
                }
            }
        } else {
            refs.push((line, ident_at(rest).to_owned()));
        }
    }
    refs
}

fn top_level_modules() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    files
        .iter()
        .filter_map(|f| module_of(f.strip_prefix(src_dir()).unwrap()))
        .collect()
}

#[test]
fn top_level_modules_import_only_lower_layers() {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let modules = top_level_modules();
    let mut offences = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let Some(module) = module_of(rel) else {
            continue;
        };
        let Some(own) = layer_of(&module) else {
            continue; // reported by every_top_level_module_has_a_layer
        };
        let text = std::fs::read_to_string(file).expect("read source");
        let lines: Vec<&str> = text.lines().collect();
        for (line, target) in crate_refs(&code_only(&text)) {
            let why = if target == module {
                continue;
            } else if !modules.contains(&target) {
                "goes through the crate root; name the module that defines it".to_owned()
            } else {
                match layer_of(&target) {
                    Some(t) if t < own => continue,
                    Some(t) if t == own => format!("`{target}` is in the same layer as `{module}`"),
                    Some(_) => format!("`{target}` is in a higher layer than `{module}`"),
                    None => continue, // reported by every_top_level_module_has_a_layer
                }
            };
            offences.push(format!(
                "src/{}:{line}: crate::{target} ({why})\n    {}",
                rel.display(),
                lines.get(line - 1).map_or("", |l| l.trim())
            ));
        }
    }
    assert!(
        offences.is_empty(),
        "imports against the layer order (bottom to top: {:?}):\n{}",
        LAYERS,
        offences.join("\n")
    );
}

#[test]
fn every_top_level_module_has_a_layer() {
    let modules = top_level_modules();
    let unplaced: Vec<_> = modules.iter().filter(|m| layer_of(m).is_none()).collect();
    assert!(
        unplaced.is_empty(),
        "top-level modules missing from LAYERS in tests/layers.rs (and ARCHITECTURE.md): {unplaced:?}"
    );
    let stale: Vec<_> = LAYERS
        .iter()
        .flat_map(|l| l.iter())
        .filter(|m| !modules.contains(**m))
        .collect();
    assert!(
        stale.is_empty(),
        "LAYERS names modules that no longer exist: {stale:?}"
    );
}

#[test]
fn modules_are_at_most_one_folder_deep() {
    // Deeper files would make `super::super::x` reach another top-level module unseen.
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let deep: Vec<_> = files
        .iter()
        .map(|f| f.strip_prefix(&src).unwrap())
        .filter(|f| f.components().count() > 2)
        .collect();
    for f in &deep {
        let text = std::fs::read_to_string(src.join(f)).unwrap();
        assert!(
            !code_only(&text).contains("super::super::"),
            "src/{} uses super::super:: (may leave its top-level module unchecked)",
            f.display()
        );
    }
}

#[test]
fn reference_scanner_reads_groups_and_ignores_comments_and_strings() {
    let text = r##"
//! See [`crate::http`] for the router.
use crate::db::{self, Tx};
use crate::{outbox::notify, state::AppState};
use crate::inventory::{holds::{self, Hold}, pools};
let url = "http://x/crate::payments";
let raw = r#"crate::payments"#;
let c = '"'; let d: &'static str = "a"; /* crate::http */
fn f() { crate::telemetry::booked(); }
"##;
    let refs = crate_refs(&code_only(text));
    let names: Vec<_> = refs.iter().map(|(l, n)| format!("{l}:{n}")).collect();
    assert_eq!(
        names,
        ["3:db", "4:outbox", "4:state", "5:inventory", "9:telemetry"]
    );
}

#[test]
fn every_transaction_begins_as_a_writer() {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let db = src.join("db");
    let mut plain = Vec::new();
    for f in files.iter().filter(|f| !f.starts_with(&db)) {
        let code = code_only(&std::fs::read_to_string(f).expect("read"));
        for (n, line) in code.lines().enumerate() {
            if line.contains(".begin().await") {
                plain.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(files.len() > 20, "read the crate's sources: {files:?}");
    assert!(
        plain.is_empty(),
        "transactions begun with a plain BEGIN (use db::begin_write):\n{}",
        plain.join("\n")
    );
}
