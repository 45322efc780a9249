//! The top-level modules of `proxy/src` form layers: no module reaches, through `crate::`
//! paths, a module that reaches back to it. A cycle would mean two features that cannot be
//! read, tested or moved apart — the forward and transparent listeners sharing a relay by
//! importing each other, a feature's state importing the router that serves it.
//!
//! The scan reads every source file outside test modules (files named `tests.rs`, folders
//! named `tests`, and an inline `#[cfg(test)] mod tests { … }` at the end of a file), drops
//! comment lines, and collects `crate::<module>` and `crate::{<module>, …}` references.
#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level modules: `src/<name>.rs` and `src/<name>/`, except the crate roots.
fn top_level_modules() -> BTreeSet<String> {
    let mut mods = BTreeSet::new();
    for entry in std::fs::read_dir(src()).expect("src must be readable") {
        let path = entry.expect("a directory entry").path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if let Some(stem) = name.strip_suffix(".rs") {
            if stem != "lib" && stem != "main" {
                mods.insert(stem.to_string());
            }
        } else if path.is_dir() {
            mods.insert(name.to_string());
        }
    }
    mods
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable folder") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                source_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// The code of a file without its inline test module and without comment lines.
fn code_of(text: &str) -> String {
    let text = text
        .find("#[cfg(test)]\nmod tests {")
        .map_or(text, |at| &text[..at]);
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules `code` names through `crate::`.
fn references(code: &str, mods: &BTreeSet<String>) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let name = ident(item.trim());
                if mods.contains(&name) {
                    out.insert(name);
                }
            }
        } else {
            let name = ident(rest);
            if mods.contains(&name) {
                out.insert(name);
            }
        }
    }
    out
}

fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mods = top_level_modules();
    let mut graph: BTreeMap<String, BTreeSet<String>> =
        mods.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    let root = src();
    let mut files = Vec::new();
    source_files(&root, &mut files);
    for file in files {
        let rel = file.strip_prefix(&root).expect("under src");
        let first = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or_default();
        let module = first.strip_suffix(".rs").unwrap_or(first).to_string();
        let Some(edges) = graph.get_mut(&module) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("a readable source file");
        for target in references(&code_of(&text), &mods) {
            if target != module {
                edges.insert(target);
            }
        }
    }
    graph
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in &self.graph[v] {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn no_top_level_module_imports_one_that_imports_it_back() {
    let graph = module_graph();
    assert!(
        graph.len() > 20,
        "the scan must see the crate's modules: {:?}",
        graph.keys()
    );
    let found = cycles(&graph);
    let explain: Vec<String> = found
        .iter()
        .map(|component| {
            let edges: Vec<String> = component
                .iter()
                .map(|m| {
                    let inside: Vec<&str> = graph[m]
                        .iter()
                        .filter(|t| component.contains(t))
                        .map(String::as_str)
                        .collect();
                    format!("{m} -> {}", inside.join(", "))
                })
                .collect();
            edges.join("; ")
        })
        .collect();
    assert!(found.is_empty(), "import cycles: {}", explain.join(" | "));
}

#[test]
fn the_scan_finds_a_cycle_when_there_is_one() {
    let mods: BTreeSet<String> = ["a", "b", "c", "d"].map(String::from).into();
    let refs = |code: &str| references(&code_of(code), &mods);
    let graph = BTreeMap::from([
        ("a".to_string(), refs("use crate::{b, x::y};\n")),
        ("b".to_string(), refs("fn f() { crate::c::g() }\n")),
        (
            "c".to_string(),
            refs("// crate::d in a comment\nuse crate::a::Thing;\n"),
        ),
        (
            "d".to_string(),
            refs("fn h() {}\n#[cfg(test)]\nmod tests {\n    use crate::a::Thing;\n}\n"),
        ),
    ]);
    assert_eq!(cycles(&graph), vec![vec!["a", "b", "c"]]);
    assert!(
        graph["d"].is_empty(),
        "a test module's imports do not count"
    );
}
