//! Every folder of every crate forms layers: no file (with its own folder) reaches, through a
//! `crate::` or `super::` path, a sibling that reaches back to it, and no folder's own file both
//! lends its children a vocabulary and dispatches over them. A circle means two parts that
//! cannot be read, tested or moved apart: the forward listener and its HTTP relay importing
//! each other, a vendor client importing the enum that dispatches over it.
//!
//! The scan reads every source file outside test modules (files named `tests.rs`, folders
//! named `tests`, and an inline `#[cfg(test)] mod tests { … }` at the end of a file), drops
//! comment lines, and resolves each `crate::…`, `super::…` and `self::…` path (brace groups
//! included) to the module it names. A path from `a/b/x.rs` to `crate::a::c::Thing` is an
//! arrow `b -> c` inside the folder `a`. A path from a child to an item of its folder's own
//! file (`super::Thing` in `vendors/exa.rs` naming `vendors.rs`) is an arrow `exa -> (vendors.rs)`;
//! the folder's file naming a child outside `mod`/`use` lines is an arrow back.
#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path from the crate root: `["forward", "http"]`.
type ModPath = Vec<String>;

/// The crates whose `src/` is scanned.
const CRATES: [&str; 5] = ["accept", "iptables", "policy", "proxy", "controller"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

/// Every crate directory holding a `Cargo.toml` and a `src/`, from [`CRATES`] and any other
/// member folder the workspace grows (a crate split out later is scanned without an edit here).
fn crate_dirs() -> Vec<(String, PathBuf)> {
    let root = workspace();
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    let mut names: BTreeSet<String> = CRATES.iter().map(|s| s.to_string()).collect();
    if let Ok(manifest) = std::fs::read_to_string(root.join("Cargo.toml"))
        && let Some(members) = manifest
            .lines()
            .find(|l| l.trim_start().starts_with("members"))
    {
        for quoted in members.split('"').skip(1).step_by(2) {
            names.insert(quoted.to_string());
        }
    }
    names.remove("tests");
    for name in names {
        let dir = root.join(&name);
        if dir.join("Cargo.toml").is_file() && dir.join("src").is_dir() {
            out.push((name, dir.join("src")));
        }
    }
    out
}

/// The source files of a crate's `src/`, without test files and test folders, and without
/// `main.rs` beside a `lib.rs` (that binary is a crate of its own that uses the library).
fn crate_files(src: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    source_files(src, &mut files);
    if src.join("lib.rs").is_file() {
        let main = src.join("main.rs");
        files.retain(|f| *f != main);
    }
    files
}

/// The source files under `dir`, without test files and test folders.
fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("a readable folder")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
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

/// The module a file is: `src/forward/http.rs` is `forward::http`, `src/lib.rs` the root.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: ModPath = rel
        .components()
        .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
        .collect();
    if let Some(last) = parts.last_mut()
        && let Some(stem) = last.strip_suffix(".rs")
    {
        *last = stem.to_string();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts
}

/// Every module of a crate: each file's module and each folder's.
fn modules(src: &Path, files: &[PathBuf]) -> BTreeSet<ModPath> {
    let mut out = BTreeSet::new();
    for file in files {
        let mut m = module_of(src, file);
        while !m.is_empty() {
            out.insert(m.clone());
            m.pop();
        }
    }
    out.insert(Vec::new());
    out
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

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a use tree or path expression starting at `rest` spells, each a list of
/// segments; brace groups are expanded, `*` and `self` inside a group end a path.
fn expand(rest: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path: Vec<String> = prefix.to_vec();
    let mut s = rest;
    loop {
        s = s.trim_start();
        if let Some(group) = s.strip_prefix('{') {
            // Split the group at top-level commas.
            let mut depth = 0usize;
            let mut start = 0usize;
            let mut items = Vec::new();
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        items.push(&group[start..i]);
                        break;
                    }
                    '}' => depth = depth.saturating_sub(1),
                    ',' if depth == 0 => {
                        items.push(&group[start..i]);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            for item in items {
                let item = item.trim();
                if item.is_empty() {
                    continue;
                }
                if item == "self" || item == "*" {
                    out.push(path.clone());
                } else {
                    expand(item, &path, out);
                }
            }
            return;
        }
        let ident: String = s.chars().take_while(|c| is_ident(*c)).collect();
        if ident.is_empty() {
            out.push(path);
            return;
        }
        path.push(ident.clone());
        s = &s[ident.len()..];
        match s.strip_prefix("::") {
            Some(more) => s = more,
            None => {
                out.push(path);
                return;
            }
        }
    }
}

/// The absolute paths that `code`, in module `here`, names through `crate::`, `super::` and
/// `self::`.
fn references(code: &str, here: &ModPath, children: &[String]) -> Vec<ModPath> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    // A bare `child::Item` names a child module of this one.
    for child in children {
        let spelled = format!("{child}::");
        for (at, _) in code.match_indices(&spelled) {
            if at > 0 && (is_ident(bytes[at - 1] as char) || bytes[at - 1] == b':') {
                continue;
            }
            let mut paths = Vec::new();
            expand(
                &code[at + spelled.len()..],
                &[here.clone(), vec![child.clone()]].concat(),
                &mut paths,
            );
            out.extend(paths);
        }
    }
    for keyword in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(keyword) {
            if at > 0 && (is_ident(bytes[at - 1] as char) || bytes[at - 1] == b':') {
                continue;
            }
            let mut base: ModPath = match keyword {
                "crate::" => Vec::new(),
                "super::" => {
                    let mut b = here.clone();
                    b.pop();
                    b
                }
                _ => here.clone(),
            };
            let mut rest = &code[at + keyword.len()..];
            while let Some(more) = rest.strip_prefix("super::") {
                base.pop();
                rest = more;
            }
            let mut paths = Vec::new();
            expand(rest, &base, &mut paths);
            out.extend(paths);
        }
    }
    out
}

/// The arrows inside one folder: `folder -> (from -> to)`, where `from` and `to` are children
/// of `folder`, or `FOLDER_FILE` for the folder's own file.
type Arrows = BTreeMap<ModPath, BTreeSet<(String, String)>>;

const FOLDER_FILE: &str = "(folder file)";

/// The lines of a folder file that only declare or re-export its children.
fn is_declaration(line: &str) -> bool {
    let l = line.trim_start();
    let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
    let l = l.strip_prefix("pub ").unwrap_or(l);
    l.starts_with("mod ") || l.starts_with("use ") || l.starts_with('#')
}

/// A file's code without its `mod`/`use` statements (each to its `;`) and attributes.
fn without_declarations(code: &str) -> String {
    let mut out = Vec::new();
    let mut in_statement = false;
    for line in code.lines() {
        if in_statement || is_declaration(line) {
            in_statement = !line.contains(';') && !line.trim_start().starts_with('#');
            continue;
        }
        out.push(line);
    }
    out.join("\n")
}

fn arrows_of(src: &Path) -> Arrows {
    let files = crate_files(src);
    let mods = modules(src, &files);
    let mut arrows: Arrows = BTreeMap::new();
    for file in &files {
        let here = module_of(src, file);
        let children: Vec<String> = mods
            .iter()
            .filter(|m| m.len() == here.len() + 1 && m.starts_with(&here))
            .filter_map(|m| m.last().cloned())
            .collect();
        let text = std::fs::read_to_string(file).expect("a readable source file");
        let code = code_of(&text);
        // A folder file's re-exports and declarations are its façade, not a use of its children.
        let body = without_declarations(&code);
        for (text, facade) in [(&code, false), (&body, true)] {
            for target in references(text, &here, &children) {
                // The longest module prefix of the target.
                let mut module = target.clone();
                while !mods.contains(&module) {
                    module.pop();
                }
                let common = here.iter().zip(&module).take_while(|(a, b)| a == b).count();
                let folder: ModPath = here[..common].to_vec();
                match (here.get(common), module.get(common)) {
                    (Some(from), Some(to)) if !facade && from != to => {
                        arrows
                            .entry(folder)
                            .or_default()
                            .insert((from.clone(), to.clone()));
                    }
                    // A child naming an item of its folder's own file.
                    (Some(from), None) if !facade && module == folder => {
                        arrows
                            .entry(folder)
                            .or_default()
                            .insert((from.clone(), FOLDER_FILE.to_string()));
                    }
                    // The folder's own file naming a child outside its declarations.
                    (None, Some(to)) if facade => {
                        arrows
                            .entry(folder)
                            .or_default()
                            .insert((FOLDER_FILE.to_string(), to.clone()));
                    }
                    _ => {}
                }
            }
        }
    }
    arrows
}

/// Strongly connected components with more than one node (Tarjan).
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
            if let Some(next) = self.graph.get(v) {
                for w in next {
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

/// Each circle in a crate, written `folder: a -> b; b -> a`.
fn circles_of(arrows: &Arrows) -> Vec<String> {
    let mut out = Vec::new();
    for (folder, edges) in arrows {
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in edges {
            graph.entry(from.clone()).or_default().insert(to.clone());
            graph.entry(to.clone()).or_default();
        }
        for component in cycles(&graph) {
            let inside: Vec<String> = component
                .iter()
                .map(|m| {
                    let to: Vec<&str> = graph[m]
                        .iter()
                        .filter(|t| component.contains(t))
                        .map(String::as_str)
                        .collect();
                    format!("{m} -> {}", to.join(", "))
                })
                .collect();
            let name = if folder.is_empty() {
                "src".to_string()
            } else {
                folder.join("/")
            };
            out.push(format!("{name}: {}", inside.join("; ")));
        }
    }
    out
}

fn assert_layered(krate: &str) {
    let Some((_, src)) = crate_dirs().into_iter().find(|(name, _)| name == krate) else {
        panic!("the workspace must hold the crate {krate}");
    };
    let arrows = arrows_of(&src);
    let edges: usize = arrows.values().map(BTreeSet::len).sum();
    assert!(edges > 0, "the scan must see {krate}'s imports");
    let circles = circles_of(&arrows);
    assert!(
        circles.is_empty(),
        "{} import circle(s) in {krate}:\n  {}",
        circles.len(),
        circles.join("\n  ")
    );
}

#[test]
fn the_proxy_has_no_import_circle_in_any_folder() {
    assert_layered("proxy");
}

#[test]
fn the_controller_has_no_import_circle_in_any_folder() {
    assert_layered("controller");
}

#[test]
fn the_policy_crate_has_no_import_circle_in_any_folder() {
    assert_layered("policy");
}

#[test]
fn every_other_crate_has_no_import_circle_in_any_folder() {
    let mut found = Vec::new();
    for (name, src) in crate_dirs() {
        if ["proxy", "controller", "policy"].contains(&name.as_str()) {
            continue;
        }
        for circle in circles_of(&arrows_of(&src)) {
            found.push(format!("{name}: {circle}"));
        }
    }
    assert!(
        found.is_empty(),
        "import circles:\n  {}",
        found.join("\n  ")
    );
}

/// A crate planted in a temporary folder, with a circle between siblings deep in a folder,
/// one through brace groups at the top, a folder file that both lends and dispatches, and
/// references the scan must not count.
#[test]
fn the_scan_finds_a_planted_circle_and_nothing_else() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let src = dir.path().join("src");
    let write = |rel: &str, text: &str| {
        let path = src.join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a folder");
        std::fs::write(path, text).expect("a file");
    };
    write("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\nmod v;\n");
    write(
        "a.rs",
        "mod x;\nmod y;\nmod z;\nuse crate::{b::{One, c::Two}, e};\n",
    );
    write("a/x.rs", "use super::y::Thing;\n");
    write("a/y.rs", "fn f() { crate::a::z::g() }\n");
    write(
        "a/z.rs",
        "use super::super::a::x::Other;\n// super::y in a comment\n",
    );
    write("b.rs", "pub mod c;\nuse crate::c::Three;\n");
    write("b/c.rs", "pub struct Two;\n");
    write("c.rs", "use crate::a::Four;\n");
    write(
        "d.rs",
        "mod p;\nmod q;\nfn h() {}\n#[cfg(test)]\nmod tests {\n    use super::p::Thing;\n}\n",
    );
    write("d/p.rs", "use super::q::Thing;\n");
    write("d/q.rs", "pub struct Thing;\n");
    write(
        "v.rs",
        "mod k;\npub use self::k::Client;\npub struct Word;\nenum All { K(k::Client) }\nfn f() -> self::k::Client { todo!() }\n",
    );
    write("v/k.rs", "use super::Word;\npub struct Client;\n");
    let circles = circles_of(&arrows_of(&src));
    assert_eq!(
        circles,
        vec![
            "src: a -> b; b -> c; c -> a".to_string(),
            "a: x -> y; y -> z; z -> x".to_string(),
            "v: (folder file) -> k; k -> (folder file)".to_string(),
        ],
        "the planted circles, and no arrow from a comment, a test module or a re-export"
    );
}

/// The proxy's wings, bottom to top: each may import only the wings before it.
const PROXY_WINGS: [&str; 7] = ["base", "judge", "web", "live", "egress", "llm", "watch"];

/// The proxy's composition root: the modules beside the wings that wire them into the gate's
/// commands and listeners (they may import any wing; no wing imports them).
const PROXY_COMPOSITION: [&str; 5] = ["admin", "api", "app", "cli", "report_gauges"];

/// Every arrow between the proxy's top-level modules that breaks the wings' order: a wing
/// naming a wing above it or a module of the composition root.
fn wing_violations(arrows: &Arrows) -> Vec<String> {
    let rank = |m: &str| PROXY_WINGS.iter().position(|w| *w == m);
    let mut out = Vec::new();
    for (from, to) in arrows.get(&Vec::new()).into_iter().flatten() {
        let Some(from_rank) = rank(from) else {
            continue;
        };
        match rank(to) {
            Some(to_rank) if to_rank < from_rank => {}
            // The crate root holds only the re-exported crates (`crate::policy`, ...).
            None if to == FOLDER_FILE => {}
            _ => out.push(format!("{from} -> {to}")),
        }
    }
    out
}

/// The modules a folder's files (outside tests) name, other than their own folder's.
fn named_outside(src: &Path, folder: &[&str]) -> BTreeSet<ModPath> {
    let folder: ModPath = folder.iter().map(|s| s.to_string()).collect();
    let files = crate_files(src);
    let mods = modules(src, &files);
    let mut out = BTreeSet::new();
    for file in &files {
        let here = module_of(src, file);
        if !here.starts_with(&folder) {
            continue;
        }
        let children: Vec<String> = mods
            .iter()
            .filter(|m| m.len() == here.len() + 1 && m.starts_with(&here))
            .filter_map(|m| m.last().cloned())
            .collect();
        let text = std::fs::read_to_string(file).expect("a readable source file");
        for target in references(&code_of(&text), &here, &children) {
            let mut module = target.clone();
            while !mods.contains(&module) {
                module.pop();
            }
            if !module.starts_with(&folder) {
                out.insert(module);
            }
        }
    }
    out
}

#[test]
fn the_proxy_wings_keep_their_order() {
    let crates: BTreeMap<String, PathBuf> = crate_dirs().into_iter().collect();
    let src = &crates["proxy"];
    let top: BTreeSet<String> = modules(src, &crate_files(src))
        .into_iter()
        .filter(|m| m.len() == 1)
        .map(|m| m[0].clone())
        .collect();
    let placed: BTreeSet<String> = PROXY_WINGS
        .iter()
        .chain(&PROXY_COMPOSITION)
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        top, placed,
        "every top-level module of proxy/src is a wing or part of the composition root"
    );
    let arrows = arrows_of(src);
    assert!(
        arrows.get(&Vec::new()).is_some_and(|a| a.len() > 10),
        "the scan sees the arrows between the wings"
    );
    assert_eq!(wing_violations(&arrows), Vec::<String>::new());
}

#[test]
fn the_relay_imports_nothing_above_the_base() {
    let crates: BTreeMap<String, PathBuf> = crate_dirs().into_iter().collect();
    let named = named_outside(&crates["proxy"], &["egress", "relay"]);
    assert!(!named.is_empty(), "the relay names the base");
    // The crate root itself is named only through its re-exported crates (`crate::policy`).
    let above: Vec<&ModPath> = named
        .iter()
        .filter(|m| !m.is_empty() && m.first().is_none_or(|w| w != "base"))
        .collect();
    assert!(above.is_empty(), "egress::relay names {above:?}");
}

#[test]
fn the_wing_check_finds_an_upward_arrow() {
    let arrows: Arrows = BTreeMap::from([(
        Vec::new(),
        BTreeSet::from([
            ("egress".to_string(), "judge".to_string()),
            ("judge".to_string(), "web".to_string()),
            ("base".to_string(), "cli".to_string()),
            ("api".to_string(), "llm".to_string()),
        ]),
    )]);
    assert_eq!(wing_violations(&arrows), ["base -> cli", "judge -> web"]);
}

/// The scan reads the real crates: it sees the forward proxy's folder and the controller's.
#[test]
fn the_scan_reads_the_workspace() {
    let crates: BTreeMap<String, PathBuf> = crate_dirs().into_iter().collect();
    for name in ["proxy", "controller", "policy"] {
        let src = &crates[name];
        let arrows = arrows_of(src);
        assert!(
            !arrows.is_empty(),
            "{name}: folders with arrows: {:?}",
            arrows.keys().collect::<Vec<_>>()
        );
    }
    let proxy = arrows_of(&crates["proxy"]);
    assert!(
        proxy.contains_key(&vec!["egress".to_string(), "forward".to_string()]),
        "the forward proxy's folder has arrows between its files"
    );
}
