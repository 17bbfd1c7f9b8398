//! Inside a crate, modules form layers too: a module names only modules
//! beneath it, so each can be read, tested and changed from the bottom
//! up. This test reads every crate's module files, takes the modules each
//! one names (`crate::a::b`, `super::x`, `self::y`, in paths and in `use`
//! groups, through the re-exports of `pub use`), and fails on a cycle
//! among them (a strongly connected set of modules). A module's own
//! submodules are parts of it, not modules beneath or above it; test
//! modules (`#[cfg(test)] mod ...`) are left out.
//!
//! Crates that still have cycles are listed in [`KNOWN_CYCLES`]: a cycle
//! there may shrink or go, but none may grow or appear. The coordinator
//! has none (issue 32: local halves, then `Target`, then the executors,
//! then the proxy, with handler registration alone on top).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module by its path inside its crate (`[]`: the crate root).
type Module = Vec<String>;

/// Cycles not yet broken, per crate: each a set of modules (`a::b` paths).
/// A cycle found must lie within one listed for its crate.
const KNOWN_CYCLES: &[(&str, &[&str])] = &[
    ("cql", &["functions", "json", "values"]),
    ("cql", &["auth::tables", "ddl", "describe", "index_ddl", "system", "traces", "user_types", "view_ddl"]),
    ("http", &["percent", "request"]),
    ("io", &["io_queue", "metrics"]),
    ("memcache", &["meta", "parse", "request"]),
    ("memcache", &["execute", "meta_exec", "stats_reply"]),
    (
        "replica",
        &[
            "counter_leader",
            "database",
            "filter",
            "item",
            "item_lru",
            "list_ops",
            "metrics",
            "mutation",
            "partition_lock",
            "paxos",
            "read",
            "view_update",
        ],
    ),
    ("schema", &["literal", "value", "vector"]),
    ("schema", &["index", "schema", "view"]),
    ("storage", &["cache", "memory", "sstable", "sstable::index_cache"]),
];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The source with comments, string and character literals blanked, so
/// that what remains names modules only in code.
fn code_of(source: &str) -> String {
    let s = source.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let rest = &source[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if let Some(comment) = rest.strip_prefix("/*") {
            i += comment.find("*/").map_or(rest.len(), |end| end + 4);
        } else if let Some((opening, hashes)) = raw_string_start(rest, i == 0 || !is_ident(s[i - 1])) {
            let closing = format!("\"{}", "#".repeat(hashes));
            i += opening + rest[opening..].find(&closing).map_or(rest.len() - opening, |end| end + closing.len());
            out.push_str("\"\"");
        } else if s[i] == b'"' {
            let mut j = i + 1;
            while j < s.len() && s[j] != b'"' {
                j += if s[j] == b'\\' { 2 } else { 1 };
            }
            i = j + 1;
            out.push_str("\"\"");
        } else if let Some(length) = char_literal_length(rest) {
            i += length;
            out.push_str("' '");
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            i += c.len_utf8();
        }
    }
    without_test_modules(&out)
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// At `r"`, `r#"`, `br"`...: the length of the opening and the number
/// of `#`s.
fn raw_string_start(rest: &str, at_word_start: bool) -> Option<(usize, usize)> {
    let after_r = rest.strip_prefix("br").or_else(|| rest.strip_prefix('r')).filter(|_| at_word_start)?;
    let hashes = after_r.bytes().take_while(|b| *b == b'#').count();
    let opening = rest.len() - after_r.len() + hashes + 1;
    after_r[hashes..].starts_with('"').then_some((opening, hashes))
}

/// At a character literal (`'x'`, `'\n'`, `'\u{..}'`), its length; a
/// lifetime is none.
fn char_literal_length(rest: &str) -> Option<usize> {
    let mut chars = rest.char_indices();
    if chars.next()?.1 != '\'' {
        return None;
    }
    let (_, first) = chars.next()?;
    if first == '\\' {
        return rest.get(3..)?.find('\'').map(|end| end + 4);
    }
    let (at, close) = chars.next()?;
    (close == '\'').then_some(at + 1)
}

/// `code` without its `#[cfg(test)] mod name { ... }` blocks.
fn without_test_modules(code: &str) -> String {
    let mut code = code.to_string();
    while let Some(at) = code.find("#[cfg(test)]") {
        let after = code[at + "#[cfg(test)]".len()..].trim_start();
        let item = after.strip_prefix("pub(crate) ").or_else(|| after.strip_prefix("pub ")).unwrap_or(after);
        let Some(open) = item.strip_prefix("mod ").and_then(|m| m.find('{').filter(|b| !m[..*b].contains(';'))) else {
            code.replace_range(at..at + "#[cfg(test)]".len(), "");
            continue;
        };
        let start = code.len() - item.len() + "mod ".len() + open;
        let end = matching_brace(&code, start);
        code.replace_range(at..=end, "");
    }
    code
}

/// The index of the `}` closing the `{` at `open`.
fn matching_brace(code: &str, open: usize) -> usize {
    let mut depth = 0usize;
    for (i, b) in code.bytes().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    code.len() - 1
}

/// The paths of a `use` tree, each with the name it is known by:
/// `a::{b, c::{d, e as f}}` is `a::b` (`b`), `a::c::d` (`d`), `a::c::e`
/// (`f`).
fn use_tree_paths(prefix: &[String], tree: &str, out: &mut Vec<(Vec<String>, String)>) {
    let mut depth = 0;
    let mut item_start = 0;
    let mut items = Vec::new();
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&tree[item_start..i]);
                item_start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&tree[item_start..]);
    for item in items.into_iter().map(str::trim).filter(|i| !i.is_empty()) {
        let mut path = prefix.to_vec();
        match item.find('{') {
            Some(open) => {
                path.extend(segments(&item[..open]));
                let close = item.rfind('}').unwrap_or(item.len());
                use_tree_paths(&path, &item[open + 1..close], out);
            }
            None => {
                let mut parts = item.split(" as ");
                path.extend(segments(parts.next().unwrap_or(item)));
                let name = parts.next().map(str::trim).map(str::to_string);
                let name = name.or_else(|| path.last().cloned()).unwrap_or_default();
                out.push((path, name));
            }
        }
    }
}

fn segments(path: &str) -> impl Iterator<Item = String> + '_ {
    path.split("::").map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// Every path in `code` that starts at `crate`, `super` or `self`,
/// groups expanded.
fn paths_from_roots(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let bytes = code.as_bytes();
    for root in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(root) {
            if at > 0 && (is_ident(bytes[at - 1]) || bytes[at - 1] == b':') {
                continue;
            }
            let mut end = at;
            while end < bytes.len() && (is_ident(bytes[end]) || bytes[end] == b':') {
                end += 1;
            }
            let prefix: Vec<String> = segments(&code[at..end]).collect();
            if bytes.get(end) == Some(&b'{') && code[..end].ends_with("::") {
                let close = matching_brace(code, end);
                let mut group = Vec::new();
                use_tree_paths(&prefix, &code[end + 1..close], &mut group);
                paths.extend(group.into_iter().map(|(path, _)| path));
            } else {
                paths.push(prefix);
            }
        }
    }
    paths
}

/// A crate's modules, each with its code.
fn modules_of(src: &Path) -> BTreeMap<Module, String> {
    let mut modules = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let relative = path.strip_prefix(src).expect("under src").with_extension("");
            let mut module: Module = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            if matches!(module.last().map(String::as_str), Some("lib" | "main" | "mod")) {
                module.pop();
            }
            let source = std::fs::read_to_string(&path).expect("a readable source file");
            modules.insert(module, code_of(&source));
        }
    }
    modules
}

/// `path` as seen from `module`: absolute inside the crate.
fn absolute(module: &Module, path: &[String]) -> Module {
    let mut base = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        _ => module.clone(),
    };
    for segment in path.iter().skip(usize::from(path.first().is_some_and(|s| s == "crate"))) {
        match segment.as_str() {
            "self" => {}
            "super" => {
                base.pop();
            }
            _ => base.push(segment.clone()),
        }
    }
    base
}

/// The module edges of a crate: who names whom.
fn module_graph(modules: &BTreeMap<Module, String>) -> BTreeMap<Module, BTreeSet<Module>> {
    // Each module's `pub use` re-exports: a name to the path it stands for.
    let mut reexports: BTreeMap<Module, BTreeMap<String, Module>> = BTreeMap::new();
    for (module, code) in modules {
        let names = reexports.entry(module.clone()).or_default();
        for (at, _) in code.match_indices("pub") {
            let rest = &code[at + 3..];
            let rest = rest.strip_prefix("(crate)").unwrap_or(rest);
            let Some(tree) = rest.trim_start().strip_prefix("use ") else { continue };
            let mut paths = Vec::new();
            use_tree_paths(&[], &tree[..tree.find(';').unwrap_or(tree.len())], &mut paths);
            for (path, name) in paths {
                let relative_to_here = modules.contains_key(&absolute(module, &path[..1]));
                if !matches!(path[0].as_str(), "crate" | "self" | "super") && !relative_to_here {
                    continue; // another crate's item
                }
                names.insert(name, absolute(module, &path));
            }
        }
    }
    // The module owning an item's path, through re-exports (a few deep).
    let owner_of = |path: &Module| -> Module {
        (0..=path.len()).rev().map(|k| path[..k].to_vec()).find(|m| modules.contains_key(m)).unwrap_or_default()
    };
    let resolve = |mut path: Module| -> Module {
        for _ in 0..8 {
            let owner = owner_of(&path);
            match path.get(owner.len()).and_then(|name| reexports.get(&owner)?.get(name)) {
                Some(target) if *target != path => path = target.clone(),
                _ => break,
            }
        }
        owner_of(&path)
    };
    modules
        .iter()
        .map(|(module, code)| {
            let named = paths_from_roots(code)
                .iter()
                .map(|path| resolve(absolute(module, path)))
                .filter(|target| !target.starts_with(module))
                .collect();
            (module.clone(), named)
        })
        .collect()
}

/// The cycles of a graph: its strongly connected sets of two or more
/// (Tarjan's algorithm).
fn cycles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<BTreeSet<Module>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        found: Vec<BTreeSet<Module>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, module: &'a Module) {
            let graph = self.graph;
            let order = self.index.len();
            self.index.insert(module, order);
            self.low.insert(module, order);
            self.stack.push(module);
            for next in graph.get(module).into_iter().flatten() {
                let Some((next, _)) = graph.get_key_value(next) else { continue };
                if !self.index.contains_key(next) {
                    self.visit(next);
                    self.low.insert(module, self.low[module].min(self.low[next]));
                } else if self.stack.contains(&next) {
                    self.low.insert(module, self.low[module].min(self.index[next]));
                }
            }
            if self.low[module] == self.index[module] {
                let at = self.stack.iter().rposition(|m| *m == module).expect("on the stack");
                let set: BTreeSet<Module> = self.stack.drain(at..).cloned().collect();
                if set.len() > 1 {
                    self.found.push(set);
                }
            }
        }
    }
    let mut walk = Walk { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for module in graph.keys() {
        if !walk.index.contains_key(module) {
            walk.visit(module);
        }
    }
    walk.found
}

fn named(module: &Module) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

#[test]
fn no_crate_has_a_module_cycle_beyond_those_known() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(crates_dir()).expect("the crates directory") {
        let dir = entry.expect("a directory entry").path();
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let known: Vec<BTreeSet<&str>> =
            KNOWN_CYCLES.iter().filter(|(c, _)| *c == name).map(|(_, m)| m.iter().copied().collect()).collect();
        for cycle in cycles(&module_graph(&modules_of(&src))) {
            let names: BTreeSet<String> = cycle.iter().map(named).collect();
            if !known.iter().any(|k| names.iter().all(|n| k.contains(n.as_str()))) {
                wrong.push(format!("{name}: {}", names.into_iter().collect::<Vec<_>>().join(" <-> ")));
            }
        }
        checked += 1;
    }
    assert!(checked >= 10, "found only {checked} crates under {}", crates_dir().display());
    assert!(wrong.is_empty(), "modules that name each other in a cycle:\n{}", wrong.join("\n"));
}

#[test]
fn the_reader_follows_groups_supers_and_reexports_and_skips_comments_and_tests() {
    let files = [
        ("", "mod a; mod b; pub use a::Thing;\n"),
        ("a", "//! [`crate::b`] in a comment\nuse crate::{b::{self, x}, Thing as T};\nconst S: &str = \"crate::c\";\n"),
        ("b", "pub fn f() { super::Thing::new(); }\n#[cfg(test)]\nmod tests { use crate::c::y; }\n"),
        ("c", "use self::d::z;\n"),
        ("c::d", "use super::super::b::f;\n"),
    ];
    let modules: BTreeMap<Module, String> =
        files.iter().map(|(path, source)| (segments(path).collect(), code_of(source))).collect();
    let graph = module_graph(&modules);
    let edges = |from: &str| graph[&segments(from).collect::<Module>()].iter().map(named).collect::<Vec<_>>();
    assert_eq!(edges("a"), ["b"], "a::Thing through the root's re-export is a's own");
    assert_eq!(edges("b"), ["a"], "super::Thing is the root's re-export of a's");
    assert_eq!(edges("c"), Vec::<String>::new(), "a module's own submodules are parts of it");
    assert_eq!(edges("c::d"), ["b"]);
    let found: Vec<Vec<String>> = cycles(&graph).iter().map(|c| c.iter().map(named).collect()).collect();
    assert_eq!(found, [["a", "b"]]);
}
