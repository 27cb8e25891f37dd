//! No two files of a crate import each other, directly or round a loop (the check `farm-studio
//! look` makes, kept in CI). A module and its own submodules may use each other's items: that
//! is how Rust modules are built, so those edges do not count. Test modules are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[test]
fn no_file_imports_itself_round_a_loop() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found: Vec<Vec<String>> = Vec::new();
    for src in crate_sources(&root) {
        let files = modules(&src);
        let edges = edges(&files);
        for scc in loops(&files, &edges) {
            let names = scc.iter().map(|f| relative(&root, f)).collect();
            found.push(names);
        }
    }
    found.sort();
    assert!(
        found.is_empty(),
        "files that import each other round a loop: {found:#?}"
    );
}

#[test]
fn a_loop_between_siblings_is_found_and_a_parent_child_pair_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nuse a::X;\n").unwrap();
    std::fs::write(src.join("a.rs"), "mod c;\nuse crate::b::{Y, z::W};\n").unwrap();
    std::fs::write(src.join("a/c.rs"), "use super::super::X; // crate::b::Q\n").unwrap();
    std::fs::write(src.join("b.rs"), "fn f() { crate::a::f() }\n").unwrap();
    let files = modules(&src);
    let found = loops(&files, &edges(&files));
    let names: Vec<Vec<String>> = found
        .iter()
        .map(|l| l.iter().map(|f| relative(&src, f)).collect())
        .collect();
    assert_eq!(names, [["a.rs", "b.rs"]]);
}

/// Every crate's src/ in the workspace (tests/, examples/ and benches are not modules of it).
fn crate_sources(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if !p.is_dir() || name.starts_with('.') || name == "target" || name == "fuzz" {
                continue;
            }
            if name == "src" && dir.join("Cargo.toml").exists() {
                out.push(p);
            } else {
                dirs.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Module path -> file, for the library's files (main.rs is a thin binary of its own crate).
fn modules(src: &Path) -> BTreeMap<Vec<String>, (PathBuf, String)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") || p == src.join("main.rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut path: Vec<String> = rel
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect();
            if matches!(path.last().map(String::as_str), Some("mod" | "lib")) {
                path.pop();
            }
            let text = std::fs::read_to_string(&p).unwrap();
            out.insert(path, (p, strip(&text)));
        }
    }
    // Modules declared `#[cfg(test)]` (and theirs) are tests.
    let tests: Vec<Vec<String>> = out
        .iter()
        .flat_map(|(path, (_, text))| {
            test_modules(text).into_iter().map(move |m| {
                let mut p = path.clone();
                p.push(m);
                p
            })
        })
        .collect();
    out.retain(|path, _| !tests.iter().any(|t| path.starts_with(t)));
    out
}

/// The text without comments, string and char literals, and an inline `mod tests { .. }`.
fn strip(text: &str) -> String {
    let text = match inline_tests(text) {
        Some(i) => &text[..i],
        None => text,
    };
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '\'' => {
                // A char literal ('x', '\n', '"'); a lifetime ('a) is left as it is.
                let mut ahead = chars.clone();
                let literal = match ahead.next() {
                    Some('\\') => true,
                    Some(_) => ahead.next() == Some('\''),
                    None => false,
                };
                if literal {
                    for c in chars.by_ref() {
                        if c == '\'' {
                            break;
                        }
                    }
                    if chars.peek() == Some(&'\'') {
                        chars.next();
                    }
                }
                out.push(' ');
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            _ => out.push(c),
        }
    }
    out
}

/// Where an inline `#[cfg(test)] mod tests { .. }` starts (the end of a file, by convention).
fn inline_tests(text: &str) -> Option<usize> {
    text.match_indices("#[cfg(test)]")
        .map(|(i, _)| i)
        .find(|&i| {
            let decl = after_visibility(&text[i + "#[cfg(test)]".len()..]);
            decl.strip_prefix("mod ").is_some_and(|m| {
                let m = m.trim_start_matches(is_ident).trim_start();
                m.starts_with('{')
            })
        })
}

fn after_visibility(text: &str) -> &str {
    let decl = text.trim_start();
    let decl = decl.strip_prefix("pub(crate) ").unwrap_or(decl);
    let decl = decl.strip_prefix("pub(super) ").unwrap_or(decl);
    decl.strip_prefix("pub ").unwrap_or(decl)
}

fn test_modules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("#[cfg(test)]") {
        rest = &rest[i + "#[cfg(test)]".len()..];
        if let Some(m) = after_visibility(rest).strip_prefix("mod ") {
            let name: String = m.chars().take_while(|c| is_ident(*c)).collect();
            out.push(name);
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// file -> the files it takes names from, leaving out its ancestors and descendants.
fn edges(files: &BTreeMap<Vec<String>, (PathBuf, String)>) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut out: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (module, (file, text)) in files {
        let targets = out.entry(file.clone()).or_default();
        let mut found = paths(text, module);
        // `use super::admission;` then `admission::quota::charge(..)`: the module's name.
        let aliases: Vec<Vec<String>> = found
            .iter()
            .filter(|p| p.len() > module.len().min(1) && files.contains_key(*p))
            .cloned()
            .collect();
        for alias in aliases {
            found.extend(alias_paths(text, &alias));
        }
        for path in found {
            let Some(target) = (1..=path.len())
                .rev()
                .find_map(|n| files.get_key_value(&path[..n]))
            else {
                continue;
            };
            let (tm, (tf, _)) = target;
            if !tm.starts_with(module) && !module.starts_with(tm) {
                targets.insert(tf.clone());
            }
        }
    }
    out
}

/// Every `crate::`, `super::` and `self::` path in `text`, absolute, with `{a, b::c}` groups
/// expanded to one path per member.
fn paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(start).map(|i| i + from) {
            from = i + start.len();
            if i > 0 && is_ident(bytes[i - 1] as char) || i > 1 && &text[i - 2..i] == "::" {
                continue;
            }
            let mut base: Vec<String> = module.to_vec();
            let mut rest = &text[i..];
            loop {
                if let Some(r) = rest.strip_prefix("crate::") {
                    base.clear();
                    rest = r;
                } else if let Some(r) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = r;
                } else if let Some(r) = rest.strip_prefix("self::") {
                    rest = r;
                } else {
                    break;
                }
            }
            tail(rest, base, &mut out);
        }
    }
    out
}

/// The paths that start with the last segment of `module` (a name `use` brought in).
fn alias_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let Some(name) = module.last() else {
        return Vec::new();
    };
    let needle = format!("{name}::");
    let mut out = Vec::new();
    for (i, _) in text.match_indices(&needle) {
        let before = text[..i].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == ':') {
            continue;
        }
        tail(&text[i + needle.len()..], module.to_vec(), &mut out);
    }
    out
}

/// The segments of `rest` after `base`: `a::b::C`, or a `{..}` group of such tails.
fn tail(rest: &str, mut base: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut rest = rest.trim_start();
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            for member in split_group(group) {
                tail(member, base.clone(), out);
            }
            return;
        }
        let seg: String = rest.chars().take_while(|c| is_ident(*c)).collect();
        if seg.is_empty() || seg == "self" {
            break;
        }
        rest = &rest[seg.len()..];
        base.push(seg);
        match rest.strip_prefix("::") {
            Some(r) => rest = r.trim_start(),
            None => break,
        }
    }
    out.push(base);
}

/// The members of a `{..}` group (the text after its `{`), split at top-level commas.
fn split_group(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                out.push(&text[start..i]);
                return out;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out
}

/// The strongly connected groups of more than one file (Tarjan's algorithm), each sorted.
fn loops<'a>(
    files: &'a BTreeMap<Vec<String>, (PathBuf, String)>,
    edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
) -> Vec<Vec<PathBuf>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, (usize, usize)>,
        stack: Vec<&'a PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a PathBuf) {
        let n = w.index.len();
        w.index.insert(v, (n, n));
        w.stack.push(v);
        for u in w.edges.get(v).into_iter().flatten() {
            match w.index.get(u).copied() {
                None => {
                    visit(w, u);
                    let low = w.index[u].1;
                    let e = w.index.get_mut(v).unwrap();
                    e.1 = e.1.min(low);
                }
                Some((ui, _)) if w.stack.contains(&u) => {
                    let e = w.index.get_mut(v).unwrap();
                    e.1 = e.1.min(ui);
                }
                Some(_) => {}
            }
        }
        let (vi, vl) = w.index[v];
        if vi == vl {
            let mut group = Vec::new();
            while let Some(x) = w.stack.pop() {
                group.push(x.clone());
                if x == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                w.out.push(group);
            }
        }
    }
    let mut w = Walk {
        edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for (file, _) in files.values() {
        if !w.index.contains_key(file) {
            visit(&mut w, file);
        }
    }
    w.out.sort();
    w.out
}

fn relative(root: &Path, file: &Path) -> String {
    let root = root.canonicalize().unwrap();
    let file = file.canonicalize().unwrap();
    file.strip_prefix(&root)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}
