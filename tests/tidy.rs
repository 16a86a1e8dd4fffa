//! The source tree's layering, read from the two crates' sources as a
//! newcomer would read them (as rust-analyzer's tidy test keeps its own
//! rules):
//!
//! - each crate's top-level modules sit in layers, bottom first, which
//!   ARCHITECTURE.md's code map states once (this test reads them from
//!   there, and checks each crate's `lib.rs` lists its modules in that
//!   order); a module imports only from layers below its own, so data
//!   flows down and no two modules import each other, directly or round a
//!   circle;
//! - the real-time crate (`crates/rt`) depends on libc, rtrb and
//!   hdrhistogram and nothing that reaches tokio, axum, serde, tracing,
//!   hyper, prometheus or tower: read from its manifest and Cargo.lock,
//!   since the compiler then refuses any use of them;
//! - inside the daemon, `state` imports none of the rooms that use it, and
//!   the renderers (`render`) do not import the HTTP layer;
//! - `unsafe` and `libc` appear only in the real-time crate's `sys/` and
//!   in the load generators' process calls, `src/load/sys.rs`;
//! - inside any room (a directory of a crate's source), the files and
//!   sub-rooms do not import one another round a circle (in the code
//!   before their tests): shared helpers live in the room whose job they
//!   are, not in whichever file needed them first;
//! - no file has more than `MAX_LINES` lines before its tests, except the
//!   few in `LONG_FILES`, each with the reason it is one job;
//! - tests stand in their tier's place: the full tier's in tests/full/,
//!   built only with `--features full-tier`, none marked by annotation.
//!
//! The tests with planted trees plant one violation of each rule and
//! check that each is reported, so the checker cannot pass by seeing
//! nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The two crates: their names in the code map, their sources, and the
/// modules where `unsafe` and `libc` may appear.
const CRATES: &[(&str, &str, &[&str])] = &[
    ("latencyd-rt", "crates/rt/src", &["sys"]),
    ("latencyd", "src", &["load::sys"]),
];

/// Crates the real-time side must not reach, directly or through another.
const NOT_IN_RT: &[&str] = &[
    "tokio",
    "axum",
    "serde",
    "serde_json",
    "tracing",
    "hyper",
    "hyper-util",
    "prometheus",
    "tower",
];

/// What the real-time crate may depend on directly.
const RT_DEPENDENCIES: &[&str] = &["hdrhistogram", "libc", "rtrb"];

/// A crate's top-level modules by layer, bottom first.
type Layers = Vec<Vec<String>>;

/// The layers ARCHITECTURE.md's code map gives each crate: in its first
/// code block, a line that starts with a crate's name opens that crate's
/// list; each line after it is one layer, its modules the words before
/// the first double space (`foo/` and `foo.rs` name `foo`).
fn code_map_layers(architecture: &str) -> BTreeMap<String, Layers> {
    let map = architecture.split("## Code map").nth(1).unwrap_or("");
    let block = map.split("```").nth(1).unwrap_or("");
    let mut crates: BTreeMap<String, Layers> = BTreeMap::new();
    let mut current = None;
    for line in block.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let first = line.split_whitespace().next().unwrap_or("");
        if CRATES.iter().any(|(name, _, _)| *name == first) {
            current = Some(first.to_string());
            continue;
        }
        let Some(krate) = &current else { continue };
        let names = line.split("  ").next().unwrap_or("");
        let layer: Vec<String> = names
            .split_whitespace()
            .map(|w| w.trim_end_matches('/').trim_end_matches(".rs").to_string())
            .collect();
        crates.entry(krate.clone()).or_default().push(layer);
    }
    crates
}

fn architecture_layers() -> BTreeMap<String, Layers> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    code_map_layers(&std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap())
}

/// Rooms of the daemon, and the rooms each must not import.
const DAEMON_FORBIDDEN: &[(&str, &[&str])] = &[
    (
        "state",
        &[
            "render",
            "http",
            "startup",
            "event_loop",
            "collector",
            "reload",
        ],
    ),
    (
        "render",
        &["http", "startup", "event_loop", "collector", "reload"],
    ),
    ("http", &["startup", "event_loop", "collector", "reload"]),
];

/// At most this many lines before a file's `#[cfg(test)]`.
const MAX_LINES: usize = 500;

/// Files allowed past `MAX_LINES` (module path, why it is one job). Keep
/// it short: a long file is usually several jobs.
const LONG_FILES: &[(&str, &str)] = &[];

/// One source file: its module path (`src/daemon/http/mod.rs` is
/// `daemon::http`) and its text.
struct SourceFile {
    module: Vec<String>,
    is_mod_rs: bool,
    text: String,
}

fn module_of(relative: &Path) -> (Vec<String>, bool) {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs").to_string();
    let is_mod_rs = stem == "mod";
    if !is_mod_rs {
        parts.push(stem);
    }
    (parts, is_mod_rs)
}

fn read_tree(root: &Path) -> Vec<SourceFile> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let (module, is_mod_rs) = module_of(path.strip_prefix(root).unwrap());
                files.push(SourceFile {
                    module,
                    is_mod_rs,
                    text: std::fs::read_to_string(&path).unwrap(),
                });
            }
        }
    }
    files.sort_by(|a, b| a.module.cmp(&b.module));
    files
}

/// The text without comments (line comments, doc comments, block
/// comments) and without the contents of string literals.
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if bytes[i..].starts_with(b"/*") {
            i += 2;
            while i < bytes.len() && !bytes[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if bytes[i] == b'"' {
            out.push('"');
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                if bytes[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            out.push('"');
            i += 1;
        } else if bytes[i] == b'\''
            && i + 2 < bytes.len()
            && (bytes[i + 2] == b'\'' || bytes[i + 1] == b'\\')
        {
            // A char literal such as '"' or '\n'; lifetimes are left alone.
            let end = bytes[i + 1..]
                .iter()
                .position(|&b| b == b'\'')
                .map_or(i + 1, |p| i + 2 + p);
            out.push_str("' '");
            i = end;
        } else {
            out.push(bytes[i] as char);
            i += 1;
        }
    }
    out
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The identifiers a path continues with after `prefix::`: one, or each
/// of a `{…}` group's first names.
fn names_after(code: &str, at: usize) -> Vec<String> {
    let rest = &code[at..];
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let mut names = Vec::new();
        let mut depth = 0;
        let mut expecting = true;
        let mut current = String::new();
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => expecting = true,
                c if depth == 0 && expecting && (c.is_alphanumeric() || c == '_') => {
                    current.push(c);
                }
                _ => {
                    if !current.is_empty() {
                        names.push(std::mem::take(&mut current));
                        expecting = false;
                    }
                }
            }
        }
        if !current.is_empty() {
            names.push(current);
        }
        names
    } else {
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() { vec![] } else { vec![name] }
    }
}

/// Every module path a file refers to through `crate::` or `super::`,
/// resolved to an absolute path of at least the module it names.
fn references(file: &SourceFile, code: &str) -> BTreeSet<Vec<String>> {
    let mut found = BTreeSet::new();
    let bytes = code.as_bytes();
    for (at, _) in code.match_indices("crate::") {
        if at > 0 && is_ident(bytes[at - 1]) {
            continue;
        }
        for name in names_after(code, at + "crate::".len()) {
            let mut path = vec![name.clone()];
            let rest = &code[at + "crate::".len() + name.len()..];
            if let Some(sub) = rest.strip_prefix("::") {
                path.extend(names_after(sub, 0).into_iter().take(1));
            }
            found.insert(path);
        }
    }
    for (at, _) in code.match_indices("super::") {
        if at > 0 && (is_ident(bytes[at - 1]) || bytes[at - 1] == b':') {
            continue;
        }
        // `super::super::…` climbs once per `super`.
        let mut base = file.module.clone();
        if !file.is_mod_rs {
            base.pop();
        }
        let mut cursor = at;
        while code[cursor..].starts_with("super::") {
            cursor += "super::".len();
            if code[cursor..].starts_with("super::") {
                base.pop();
            }
        }
        for name in names_after(code, cursor) {
            let mut path = base.clone();
            path.push(name);
            found.insert(path);
        }
    }
    found
}

fn layer_of(layers: &Layers, module: &str) -> Option<usize> {
    layers
        .iter()
        .position(|layer| layer.iter().any(|m| m == module))
}

/// Every rule broken by `files`, the sources of a crate with `layers`
/// whose `unsafe` and `libc` belong in `kernel_facing`, one line each.
fn violations(files: &[SourceFile], layers: &Layers, kernel_facing: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    for file in files {
        let name = file.module.join("::");
        let name = if name.is_empty() {
            "lib".to_string()
        } else {
            name
        };
        let code = code_of(&file.text);
        let top = file.module.first().map_or("lib", String::as_str);
        let Some(own_layer) = layer_of(layers, top) else {
            problems.push(format!(
                "{name}: the top-level module '{top}' is in no layer of ARCHITECTURE.md's code map"
            ));
            continue;
        };
        for target in references(file, &code) {
            let target_top = target[0].as_str();
            if matches!(target_top, "self" | "tests") || target_top.is_empty() {
                continue;
            }
            if target_top != top {
                match layer_of(layers, target_top) {
                    Some(layer) if layer < own_layer => {}
                    Some(_) => problems.push(format!(
                        "{name} imports {}: '{target_top}' is not in a layer below '{top}'",
                        target.join("::")
                    )),
                    // A name that is not a top-level module (an item of
                    // the crate root) is not a module dependency.
                    None => {}
                }
                continue;
            }
            let within = |room: &str| target.get(1).is_some_and(|t| t == room);
            if top == "daemon"
                && let Some(room) = file.module.get(1)
            {
                for (from, forbidden) in DAEMON_FORBIDDEN {
                    if room == from
                        && let Some(bad) = forbidden.iter().find(|r| within(r))
                    {
                        problems.push(format!(
                            "{name} imports {}: daemon::{from} must not import daemon::{bad}",
                            target.join("::")
                        ));
                    }
                }
            }
        }
        let kernel_facing = kernel_facing.iter().any(|allowed| {
            let allowed: Vec<&str> = allowed.split("::").collect();
            file.module
                .iter()
                .map(String::as_str)
                .take(allowed.len())
                .eq(allowed)
        });
        for word in ["unsafe", "libc::"] {
            // A whole word: not `unsafe_op…`, not `my_libc::`, but
            // `libc::` goes on with the item it names.
            let used = code.match_indices(word).any(|(at, _)| {
                (at == 0 || !is_ident(code.as_bytes()[at - 1]))
                    && (word.ends_with("::")
                        || !code[at + word.len()..]
                            .starts_with(|c: char| c == '_' || c.is_alphanumeric()))
            });
            if used && !kernel_facing {
                problems.push(format!(
                    "{name} uses {}: only latencyd-rt's sys/ and load/sys.rs may",
                    word.trim_end_matches(':')
                ));
            }
        }
    }
    problems
}

/// Lines before the file's tests (its first `#[cfg(test)]` at the start
/// of a line), or all of them.
fn lines_before_tests(text: &str) -> usize {
    text.lines()
        .take_while(|line| !line.starts_with("#[cfg(test)]"))
        .count()
}

/// Files over `MAX_LINES` lines before their tests and not in `LONG_FILES`.
fn long_files(files: &[SourceFile]) -> Vec<String> {
    files
        .iter()
        .filter_map(|file| {
            let name = file.module.join("::");
            let lines = lines_before_tests(&file.text);
            (lines > MAX_LINES && !LONG_FILES.iter().any(|(allowed, _)| *allowed == name)).then(
                || {
                    format!(
                        "{name} has {lines} lines before its tests: at most {MAX_LINES} (split it \
                         along its jobs, or list it in LONG_FILES with why it is one)"
                    )
                },
            )
        })
        .collect()
}

/// At most this many lines in a function (from `fn` to its closing brace)
/// before a file's tests.
const MAX_FN_LINES: usize = 100;

/// Functions allowed past `MAX_FN_LINES`, with their length: an entry may
/// only shrink (its figure lowered with it), none may pass
/// `MAX_EXCEPTION_LINES`, and one that fits is taken off.
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[
    // A sampler's thread start: pin, block signals, pre-fault, switch
    // policy, in the order the real-time side needs them.
    ("thread", "spawn", 112),
];

/// The longest a listed function may be.
const MAX_EXCEPTION_LINES: usize = 150;

/// Each function before the file's tests: (name, lines from its `fn` line
/// to its closing brace). Comments and strings do not count as braces.
fn functions(text: &str) -> Vec<(String, usize)> {
    let code = code_of(text);
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let Some(at) = line.find("fn ") else { continue };
        let before = line[..at].trim();
        let words_before_ok = before.split_whitespace().all(|w| {
            ["pub", "const", "async", "unsafe", "extern", "\"C\""].contains(&w)
                || w.starts_with("pub(")
        });
        if !words_before_ok || (at > 0 && is_ident(line.as_bytes()[at - 1])) {
            continue;
        }
        let name: String = line[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The body: from the first `{` after the signature to its match;
        // a `;` first means a declaration without a body.
        let mut depth = 0usize;
        let mut opened = false;
        let mut end = None;
        'scan: for (i, text) in lines.iter().enumerate().skip(start) {
            let from = if i == start { at } else { 0 };
            for c in text[from..].chars() {
                match c {
                    ';' if !opened => break 'scan,
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => {
                        depth -= 1;
                        if opened && depth == 0 {
                            end = Some(i);
                            break 'scan;
                        }
                    }
                    _ => {}
                }
            }
        }
        if let Some(end) = end {
            found.push((name, end - start + 1));
        }
    }
    found
}

/// Functions over `MAX_FN_LINES`, checked against `LONG_FUNCTIONS`.
fn long_functions(files: &[SourceFile], allowed: &[(&str, &str, usize)]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = Vec::new();
    for file in files {
        let module = file.module.join("::");
        for (name, lines) in functions(&file.text) {
            let listed = allowed.iter().find(|(m, f, _)| *m == module && *f == name);
            match listed {
                _ if lines <= MAX_FN_LINES => {
                    if listed.is_some() {
                        problems.push(format!(
                            "{module}::{name} fits in {MAX_FN_LINES} lines now ({lines}): take \
                             it off LONG_FUNCTIONS"
                        ));
                    }
                }
                None => problems.push(format!(
                    "{module}::{name} has {lines} lines: at most {MAX_FN_LINES} (split it into \
                     named steps)"
                )),
                Some(&(_, _, figure)) if lines > figure => problems.push(format!(
                    "{module}::{name} grew to {lines} lines from {figure}: LONG_FUNCTIONS may \
                     only shrink"
                )),
                Some(&(_, _, figure)) if lines < figure => problems.push(format!(
                    "{module}::{name} shrank to {lines} lines: lower its figure in \
                     LONG_FUNCTIONS from {figure}"
                )),
                Some(_) => {}
            }
            seen.push((module.clone(), name));
        }
    }
    for (module, name, figure) in allowed {
        if *figure > MAX_EXCEPTION_LINES {
            problems.push(format!(
                "{module}::{name} is listed at {figure} lines: no exception may pass \
                 {MAX_EXCEPTION_LINES}"
            ));
        }
        if !seen.iter().any(|(m, f)| m == module && f == name) {
            problems.push(format!(
                "{module}::{name} is in LONG_FUNCTIONS but not in the tree: take it off"
            ));
        }
    }
    problems
}

/// Documents and the most lines each may have: a map is read in minutes.
const DOCUMENT_LINES: &[(&str, usize)] = &[
    ("ARCHITECTURE.md", 300),
    ("docs/benchmarks.md", 220),
    ("README.md", 200),
];

fn long_documents(documents: &[(&str, &str)], limits: &[(&str, usize)]) -> Vec<String> {
    limits
        .iter()
        .filter_map(|(path, limit)| {
            let text = documents.iter().find(|(p, _)| p == path)?.1;
            let lines = text.lines().count();
            (lines > *limit).then(|| {
                format!(
                    "{path} has {lines} lines: at most {limit} (say what is, not how it was \
                     found; history goes to CHANGELOG.md and commit messages)"
                )
            })
        })
        .collect()
}

/// Circles of imports among the files and sub-rooms of each room below
/// the top level (the top level has its layers). One line per circle: the
/// members, which all reach one another.
fn room_circles(files: &[SourceFile]) -> Vec<String> {
    let modules: BTreeSet<&[String]> = files.iter().map(|f| f.module.as_slice()).collect();
    let is_module = |path: &[String]| modules.iter().any(|m| m.starts_with(path));
    // room -> member -> members it imports
    let mut edges: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in files {
        // The code the program is made of: a unit test may exercise two
        // files of its room together without making them one job.
        let before_tests: String = file
            .text
            .lines()
            .take_while(|line| !line.starts_with("#[cfg(test)]"))
            .collect::<Vec<_>>()
            .join("\n");
        let code = code_of(&before_tests);
        for target in references(file, &code) {
            let common = file
                .module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            let (Some(from), Some(to)) = (file.module.get(common), target.get(common)) else {
                continue;
            };
            if common == 0 || !is_module(&target[..=common]) {
                continue;
            }
            edges
                .entry(file.module[..common].to_vec())
                .or_default()
                .entry(from.clone())
                .or_default()
                .insert(to.clone());
        }
    }
    let mut circles = Vec::new();
    for (room, graph) in &edges {
        let reach = |start: &String| {
            let mut seen = BTreeSet::new();
            let mut stack = vec![start.clone()];
            while let Some(node) = stack.pop() {
                for next in graph.get(&node).into_iter().flatten() {
                    if seen.insert(next.clone()) {
                        stack.push(next.clone());
                    }
                }
            }
            seen
        };
        let reaches: BTreeMap<&String, BTreeSet<String>> =
            graph.keys().map(|node| (node, reach(node))).collect();
        let mut reported = BTreeSet::new();
        for (node, reached) in &reaches {
            if !reached.contains(*node) || reported.contains(*node) {
                continue;
            }
            let circle: BTreeSet<String> = reached
                .iter()
                .filter(|other| reaches.get(other).is_some_and(|r| r.contains(*node)))
                .cloned()
                .collect();
            reported.extend(circle.iter().cloned());
            circles.push(format!(
                "a circle inside {}: {} import one another",
                room.join("::"),
                circle.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    circles
}

#[test]
fn the_source_tree_keeps_its_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let layers = architecture_layers();
    let mut problems = Vec::new();
    let mut all = Vec::new();
    for (krate, src, kernel_facing) in CRATES {
        let files = read_tree(&root.join(src));
        assert!(files.len() > 10, "read {} files under {src}/", files.len());
        let Some(layers) = layers.get(*krate) else {
            panic!("ARCHITECTURE.md's code map has no list of {krate}'s layers");
        };
        problems.extend(violations(&files, layers, kernel_facing));
        problems.extend(room_circles(&files));
        problems.extend(stale_layers(krate, &files, layers));
        all.extend(files);
    }
    // Sizes over both crates (their top-level modules share no name).
    problems.extend(long_files(&all));
    problems.extend(long_functions(&all, LONG_FUNCTIONS));
    assert!(
        problems.is_empty(),
        "layering broken (see the rules at the top of tests/tidy.rs and ARCHITECTURE.md):\n{}",
        problems.join("\n")
    );
}

/// The registered instruments' folders (`super::NAME::ENTRY` in
/// `instruments/registry.rs`).
fn registered_instruments(files: &[SourceFile]) -> Vec<String> {
    let Some(registry) = files
        .iter()
        .find(|f| f.module == ["instruments", "registry"])
    else {
        return vec![];
    };
    let code = code_of(&registry.text);
    code.split("super::")
        .skip(1)
        .filter_map(|rest| rest.split_once("::ENTRY").map(|(name, _)| name.to_string()))
        .filter(|name| name.bytes().all(is_ident))
        .collect()
}

/// Daemon files that name a registered instrument's folder: the daemon
/// walks the registry instead. A file's tests may (they build the data a
/// page shows, a forensics capture's timerlat split among it).
fn daemon_naming_instruments(files: &[SourceFile]) -> Vec<String> {
    let instruments = registered_instruments(files);
    let mut problems = Vec::new();
    for file in files
        .iter()
        .filter(|f| f.module.first().is_some_and(|m| m == "daemon"))
    {
        let before_tests: Vec<&str> = (file.text.lines())
            .take_while(|line| !line.starts_with("#[cfg(test)]"))
            .collect();
        let code = code_of(&before_tests.join("\n"));
        for name in &instruments {
            let named = code.match_indices(name.as_str()).any(|(at, _)| {
                let before = code.as_bytes().get(at.wrapping_sub(1)).copied();
                let after = code.as_bytes().get(at + name.len()).copied();
                !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
            });
            if named {
                problems.push(format!(
                    "{} names the registered instrument {name}: walk \
                     instruments::registry::INSTRUMENTS instead",
                    file.module.join("::")
                ));
            }
        }
    }
    problems
}

#[test]
fn the_daemon_names_no_registered_instrument() {
    let files = read_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        !registered_instruments(&files).is_empty(),
        "instruments/registry.rs lists no instrument"
    );
    let problems = daemon_naming_instruments(&files);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // A planted one is found; a comment or a longer name is not.
    let planted = [
        synthetic(
            "instruments/registry.rs",
            "static I: &[&Entry] = &[&super::gauge::ENTRY];",
        ),
        synthetic("daemon/collector.rs", "use crate::instruments::gauge::Run;"),
        synthetic("daemon/render/page.rs", "// gauge\nfn gauges() {}"),
        synthetic(
            "daemon/render/page_parts.rs",
            "fn page() {}\n#[cfg(test)]\nmod tests {\n    fn t(s: S) { s.gauge; }\n}\n",
        ),
    ];
    assert_eq!(
        daemon_naming_instruments(&planted),
        [
            "daemon::collector names the registered instrument gauge: walk \
          instruments::registry::INSTRUMENTS instead"
        ]
    );
}

/// Modules the code map lists that the crate does not have.
fn stale_layers(krate: &str, files: &[SourceFile], layers: &Layers) -> Vec<String> {
    layers
        .iter()
        .flatten()
        .filter(|name| !["lib", "main"].contains(&name.as_str()))
        .filter(|name| !files.iter().any(|f| f.module.first() == Some(*name)))
        .map(|name| format!("ARCHITECTURE.md's code map lists '{name}', which {krate} has not"))
        .collect()
}

/// Where `listing` (module names in the order a file gives them)
/// disagrees with `layers`: a module in no layer, one listed after a
/// module of a higher layer, or a layer's module missing (`lib` and
/// `main` never: they are the roots).
fn layer_order_problems(what: &str, listing: &[String], layers: &Layers) -> Vec<String> {
    let mut problems = Vec::new();
    let mut highest = (0, "");
    for name in listing {
        match layer_of(layers, name) {
            None => problems.push(format!("{what} lists '{name}', which is in no layer")),
            Some(layer) if layer < highest.0 => problems.push(format!(
                "{what} lists '{name}' after '{}', a higher layer's module",
                highest.1
            )),
            Some(layer) => highest = (layer, name),
        }
    }
    let expected = layers
        .iter()
        .flatten()
        .filter(|name| !["lib", "main"].contains(&name.as_str()));
    for name in expected {
        if !listing.iter().any(|l| l == name) {
            problems.push(format!("{what} does not list '{name}'"));
        }
    }
    problems
}

/// The modules a `lib.rs` declares, in its order.
fn lib_rs_modules(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|l| {
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("mod "))
        })
        .map(|m| m.trim_end_matches(';').to_string())
        .collect()
}

/// The layer order is stated once, in ARCHITECTURE.md's code map; each
/// crate's `lib.rs` declares its modules in that order.
#[test]
fn each_lib_rs_gives_the_code_maps_layers_in_their_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let layers = architecture_layers();
    let mut problems = Vec::new();
    for (krate, src, _) in CRATES {
        let path = format!("{src}/lib.rs");
        let lib = std::fs::read_to_string(root.join(&path)).unwrap();
        problems.extend(layer_order_problems(
            &path,
            &lib_rs_modules(&lib),
            &layers[*krate],
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The reading of a map, a planted disorder and a planted stranger.
    let map = "## Code map\n```\n latencyd-rt\n a b  the first\n c  the second\n lib.rs\n\
               latencyd (src)\n x/  y\n```\n";
    let read = code_map_layers(map);
    fn names(layers: &Layers) -> Vec<Vec<&str>> {
        layers
            .iter()
            .map(|l| l.iter().map(String::as_str).collect())
            .collect()
    }
    assert_eq!(
        names(&read["latencyd-rt"]),
        [vec!["a", "b"], vec!["c"], vec!["lib"]]
    );
    assert_eq!(names(&read["latencyd"]), [vec!["x"]]);
    let planted = ["c", "a", "nowhere"].map(String::from);
    let caught = layer_order_problems("planted", &planted, &read["latencyd-rt"]);
    assert_eq!(
        caught,
        [
            "planted lists 'a' after 'c', a higher layer's module",
            "planted lists 'nowhere', which is in no layer",
            "planted does not list 'b'"
        ]
    );
}

fn synthetic(path: &str, text: &str) -> SourceFile {
    let (module, is_mod_rs) = module_of(Path::new(path));
    SourceFile {
        module,
        is_mod_rs,
        text: text.to_string(),
    }
}

#[test]
fn the_documents_keep_their_length() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let texts: Vec<(&str, String)> = DOCUMENT_LINES
        .iter()
        .map(|(path, _)| (*path, std::fs::read_to_string(root.join(path)).unwrap()))
        .collect();
    let documents: Vec<(&str, &str)> = texts.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let problems = long_documents(&documents, DOCUMENT_LINES);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The check itself: one line too many is reported.
    let long = "line\n".repeat(301);
    assert_eq!(
        long_documents(&[("ARCHITECTURE.md", &long)], DOCUMENT_LINES),
        [
            "ARCHITECTURE.md has 301 lines: at most 300 (say what is, not how it was found; \
          history goes to CHANGELOG.md and commit messages)"
        ]
    );
}

#[test]
fn each_kind_of_violation_is_reported() {
    let files = [
        // Allowed: downward imports, comments and strings naming anything.
        synthetic(
            "daemon/state/mod.rs",
            "use crate::stats::LatencyStats;\n// crate::daemon::http is fine here\nconst X: &str = \"crate::daemon::render\";",
        ),
        synthetic(
            "measure/run.rs",
            "use crate::rt::engine::Engine;\nuse super::{json, text};",
        ),
        // An upward import.
        synthetic("sampling.rs", "fn f() { crate::daemon::state::thing(); }"),
        // Same-layer peers (a circle in waiting).
        synthetic("config/mod.rs", "use crate::plot::PlotData;"),
        // A renderer importing the HTTP layer through `super`.
        synthetic("daemon/render/json.rs", "use super::super::http::ApiError;"),
        // unsafe outside latencyd-rt's sys/.
        synthetic("host.rs", "fn f() { unsafe { g() } }"),
        // A circle inside a room, through a sub-room; and a long file
        // whose tests do not count.
        synthetic("daemon/alpha.rs", "use super::beta::lock;"),
        synthetic("daemon/beta.rs", "use crate::daemon::gamma::Thing;"),
        synthetic("daemon/gamma/mod.rs", "use super::super::alpha::helper;"),
        // A unit test reaching back is not a circle.
        synthetic("record/one.rs", "use super::two::Thing;"),
        synthetic(
            "record/two.rs",
            "pub struct Thing;\n#[cfg(test)]\nmod tests {\n    use crate::record::one::f;\n}\n",
        ),
        synthetic(
            "plot/long.rs",
            &format!(
                "{}#[cfg(test)]\nmod tests {{}}\n",
                "fn f() {}\n".repeat(501)
            ),
        ),
        synthetic(
            "plot/fits.rs",
            &format!(
                "{}#[cfg(test)]\n{}",
                "fn f() {}\n".repeat(500),
                "fn t() {}\n".repeat(99)
            ),
        ),
    ];
    let layers = architecture_layers();
    let mut problems = violations(&files, &layers["latencyd"], &["load::sys"]);
    // The real-time crate: a file reaching up, and unsafe outside sys/.
    let rt = [
        synthetic("handoff.rs", "use super::engine::Engine;"),
        synthetic("sys/mod.rs", "fn f() { unsafe { g() } }"),
        synthetic("clock.rs", "fn f() { unsafe { libc::nanosleep() } }"),
    ];
    problems.extend(violations(&rt, &layers["latencyd-rt"], &["sys"]));
    problems.extend(room_circles(&files));
    problems.extend(long_files(&files));
    // Functions: one too long, one listed that grew, one listed that now
    // fits, one listed past the ceiling, one listed that is gone; braces
    // in strings and comments do not count, a test module is not read.
    let body = |n: usize| "    let x = 1;\n".repeat(n);
    let functions = [synthetic(
        "report/long.rs",
        &format!(
            "pub fn too_long() {{\n{}}}\nfn grew() {{\n{}}}\nfn fits() {{\n    let s = \"{{{{\"; // }}\n}}\n\
             pub(crate) async fn exact() {{\n{}}}\n#[cfg(test)]\nmod tests {{\n    fn t() {{\n{}}}\n}}\n",
            body(99),
            body(104),
            body(98),
            body(300)
        ),
    )];
    let allowed = [
        ("report::long", "grew", 103),
        ("report::long", "fits", 120),
        ("report::long", "exact", 160),
        ("report::long", "gone", 110),
    ];
    problems.extend(long_functions(&functions, &allowed));
    let expect = [
        "sampling imports daemon::state: 'daemon' is not in a layer below 'sampling'",
        "config imports plot::PlotData: 'plot' is not in a layer below 'config'",
        "handoff imports engine: 'engine' is not in a layer below 'handoff'",
        "clock uses unsafe: only latencyd-rt's sys/ and load/sys.rs may",
        "clock uses libc: only latencyd-rt's sys/ and load/sys.rs may",
        "daemon::render::json imports daemon::http: daemon::render must not import daemon::http",
        "host uses unsafe: only latencyd-rt's sys/ and load/sys.rs may",
        "a circle inside daemon: alpha, beta, gamma import one another",
        "plot::long has 501 lines before its tests: at most 500 (split it along its jobs, or \
         list it in LONG_FILES with why it is one)",
        "report::long::too_long has 101 lines: at most 100 (split it into named steps)",
        "report::long::grew grew to 106 lines from 103: LONG_FUNCTIONS may only shrink",
        "report::long::fits fits in 100 lines now (3): take it off LONG_FUNCTIONS",
        "report::long::exact fits in 100 lines now (100): take it off LONG_FUNCTIONS",
        "report::long::exact is listed at 160 lines: no exception may pass 150",
        "report::long::gone is in LONG_FUNCTIONS but not in the tree: take it off",
    ];
    for line in expect {
        assert!(
            problems.iter().any(|p| p == line),
            "expected the problem\n  {line}\nin\n  {}",
            problems.join("\n  ")
        );
    }
    assert_eq!(problems.len(), expect.len(), "{problems:#?}");
}

/// A version such as `1.88` or `1.85.0` as comparable numbers.
fn version_of(text: &str) -> Vec<u64> {
    let mut parts: Vec<u64> = text.split('.').map(|p| p.parse().unwrap()).collect();
    parts.resize(3, 0);
    parts
}

#[test]
fn no_dependency_needs_a_newer_rust_than_the_declared_rust_version() {
    let output = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    let output = match output {
        Ok(o) if o.status.success() => o,
        other => {
            let why = match other {
                Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                Err(e) => e.to_string(),
            };
            // As nobody, root's cargo and registry are out of reach.
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!(
                    "\n*** SKIPPED PART of no_dependency_needs_a_newer_rust_than_the_declared_rust_version: cargo metadata cannot run here: {why} ***\n"
                )
                .as_bytes(),
            );
            return;
        }
    };
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let ours = version_of(env!("CARGO_PKG_RUST_VERSION"));
    let too_new: Vec<String> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            let needs = p["rust_version"].as_str()?;
            (version_of(needs) > ours)
                .then(|| format!("{} {} needs {needs}", p["name"], p["version"]))
        })
        .collect();
    assert!(
        too_new.is_empty(),
        "rust-version is {} but: {too_new:?}",
        env!("CARGO_PKG_RUST_VERSION")
    );
}

/// Cargo builds tests/faults.rs and tests/restart.rs only with the
/// test-only fault injection (`required-features`); this says so in a
/// `cargo test` without it, instead of leaving them out silently.
#[cfg(not(feature = "fault-injection"))]
#[test]
#[ignore = "tests/faults.rs and tests/restart.rs need --features fault-injection (scripts/test passes it)"]
fn fault_injection_tests_are_built_with_their_feature() {}

/// Cargo builds the full tier's own binaries (tests/full/) only with
/// `--features full-tier` (`required-features`); this says so in a `cargo
/// test` without it, instead of leaving them out silently.
#[cfg(not(feature = "full-tier"))]
#[test]
#[ignore = "the full tier's binaries (tests/full/) need --features full-tier (scripts/test passes it)"]
fn full_tier_tests_are_built_with_their_feature() {}

/// Where the tests stand against their tier's place: a test of the full
/// tier lives in tests/full/, never in a quick file marked `#[ignore =
/// "full tier: ..."]`; a file there needs no such mark (its place says
/// it) and a `[[test]]` in the manifest that builds it only with
/// `full-tier` (Cargo does not find files in a sub-directory itself, so
/// one without it would never run).
fn test_place_problems(
    quick: &[(String, String)],
    full: &[(String, String)],
    manifest: &str,
) -> Vec<String> {
    let mark = "#[ignore = \"full tier";
    let mut problems = Vec::new();
    for (name, text) in quick {
        if text.contains(mark) {
            problems.push(format!(
                "tests/{name}: a full-tier test marked by annotation: move it to \
                 tests/full/{name} (what it shares with the quick tests to \
                 tests/common/), built by a [[test]] with required-features = [\"full-tier\"]"
            ));
        }
    }
    let targets: Vec<&str> = manifest.split("[[test]]").skip(1).collect();
    for (name, text) in full {
        if text.contains(mark) {
            problems.push(format!(
                "tests/full/{name}: marked full tier by annotation: its place says it"
            ));
        }
        let path = format!("path = \"tests/full/{name}\"");
        let built = targets.iter().any(|t| {
            let table = t.split("\n[").next().unwrap_or("");
            table.contains(&path) && table.contains("required-features = [\"full-tier\"]")
        });
        if !built {
            problems.push(format!(
                "tests/full/{name}: no [[test]] in Cargo.toml with its path and \
                 required-features = [\"full-tier\"]: it would never run"
            ));
        }
    }
    problems
}

/// The `.rs` files directly in a directory, by name, with their text.
fn rust_files_in(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn each_test_stands_in_its_tiers_place() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let quick = rust_files_in(&root.join("tests"));
    let full = rust_files_in(&root.join("tests/full"));
    assert!(full.len() > 10, "tests/full/ holds {} files", full.len());
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let problems = test_place_problems(&quick, &full, &manifest);
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // Planted: a quick file with a full-tier test, an annotated full
    // file, and one the manifest does not build.
    let file = |name: &str, text: &str| (name.to_string(), text.to_string());
    let quick = [
        file(
            "mixed.rs",
            "#[test]\nfn a() {}\n#[test]\n#[ignore = \"full tier: x\"]\nfn b() {}",
        ),
        file(
            "quick.rs",
            "#[test]\nfn a() {}\n#[test]\n#[ignore = \"needs a feature\"]\nfn b() {}",
        ),
    ];
    let full = [
        file("built.rs", "#[test]\nfn c() {}"),
        file(
            "annotated.rs",
            "#[test]\n#[ignore = \"full tier: y\"]\nfn d() {}",
        ),
        file("unbuilt.rs", "#[test]\nfn e() {}"),
    ];
    let manifest = "[[test]]\nname = \"built\"\npath = \"tests/full/built.rs\"\n\
                    required-features = [\"full-tier\"]\n\n[[test]]\nname = \"annotated\"\n\
                    path = \"tests/full/annotated.rs\"\nrequired-features = [\"full-tier\"]\n\n\
                    [[test]]\nname = \"unbuilt\"\npath = \"tests/full/unbuilt.rs\"\n\n[dev-dependencies]\n";
    let problems = test_place_problems(&quick, &full, manifest);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems[0].starts_with("tests/mixed.rs: a full-tier test"),
        "{problems:#?}"
    );
    assert!(
        problems[1].starts_with("tests/full/annotated.rs: marked"),
        "{problems:#?}"
    );
    assert!(
        problems[2].starts_with("tests/full/unbuilt.rs: no [[test]]"),
        "{problems:#?}"
    );
}

/// The names under a manifest's `[dependencies]` table.
fn manifest_dependencies(manifest: &str) -> BTreeSet<String> {
    manifest
        .split("\n[")
        .find(|table| table.starts_with("dependencies]"))
        .unwrap_or("")
        .lines()
        .skip(1)
        .filter_map(|line| {
            line.split_once('=')
                .map(|(name, _)| name.trim().to_string())
        })
        .filter(|name| !name.is_empty() && !name.starts_with('#'))
        .collect()
}

/// What breaks the real-time crate's rule: a direct dependency not in
/// `RT_DEPENDENCIES`, or a crate of `NOT_IN_RT` that Cargo.lock shows it
/// reaching through any chain of dependencies.
fn real_time_dependency_problems(manifest: &str, lock: &str) -> Vec<String> {
    let mut problems: Vec<String> = manifest_dependencies(manifest)
        .into_iter()
        .filter(|name| !RT_DEPENDENCIES.contains(&name.as_str()))
        .map(|name| format!("latencyd-rt depends on {name}: only {RT_DEPENDENCIES:?} may"))
        .collect();
    // Cargo.lock: each package's name and the names it depends on.
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for package in lock.split("[[package]]").skip(1) {
        let name = package
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .map(|n| n.trim_matches('"').to_string())
            .unwrap_or_default();
        let dependencies = package
            .split("dependencies = [")
            .nth(1)
            .and_then(|list| list.split(']').next())
            .unwrap_or("")
            .split(',')
            .filter_map(|entry| entry.trim().trim_matches('"').split(' ').next())
            .filter(|d| !d.is_empty())
            .map(String::from);
        graph.entry(name).or_default().extend(dependencies);
    }
    let mut seen = BTreeSet::new();
    let mut stack = vec![("latencyd-rt".to_string(), "latencyd-rt".to_string())];
    while let Some((name, path)) = stack.pop() {
        for next in graph.get(&name).into_iter().flatten() {
            if NOT_IN_RT.contains(&next.as_str()) {
                problems.push(format!("latencyd-rt reaches {next}: {path} -> {next}"));
            } else if seen.insert(next.clone()) {
                stack.push((next.clone(), format!("{path} -> {next}")));
            }
        }
    }
    problems
}

/// "No tokio, serde or tracing on the real-time side" is a fact of the
/// build: the real-time crate cannot name a crate it does not depend on.
/// This keeps its dependencies to the few it needs.
#[test]
fn the_real_time_crate_depends_on_libc_rtrb_and_hdrhistogram_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("crates/rt/Cargo.toml")).unwrap();
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
    let problems = real_time_dependency_problems(&manifest, &lock);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        lock.contains("name = \"latencyd-rt\""),
        "Cargo.lock has no latencyd-rt"
    );
    // Planted: a new direct dependency, and tokio reached through it.
    let manifest = manifest.replace("[dependencies]\n", "[dependencies]\nhelper = \"1\"\n");
    let lock = lock.replace(
        "name = \"latencyd-rt\"\nversion = \"0.1.0\"\ndependencies = [\n",
        "name = \"latencyd-rt\"\nversion = \"0.1.0\"\ndependencies = [\n \"helper\",\n",
    ) + "\n[[package]]\nname = \"helper\"\nversion = \"1.0.0\"\ndependencies = [\n \"tokio\",\n]\n";
    assert_eq!(
        real_time_dependency_problems(&manifest, &lock),
        [
            "latencyd-rt depends on helper: only [\"hdrhistogram\", \"libc\", \"rtrb\"] may",
            "latencyd-rt reaches tokio: latencyd-rt -> helper -> tokio"
        ]
    );
}
