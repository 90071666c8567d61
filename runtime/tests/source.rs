//! Rules of the source's shape, checked by reading it (comments, doc links, strings and
//! unit-test modules do not count):
//!
//! * The runtime's modules form layers (lib.rs lists them; docs/design.md draws them): no
//!   module imports another that imports it back, however long the way round, and outside
//!   `engine/` only the starters of thread runs name an engine. Imports are `use` and paths in
//!   code through `crate::`, `super::`, `self::`, child modules and the crate root's
//!   re-exports. What this cannot see: a method defined in one module's `impl Ctx` and called
//!   in another names no module, so such calls are kept in the layers by review (lib.rs says
//!   which modules hold what the engines call: `ctx`, `superstep`).
//! * No function of the runtime, the C ABI or the algorithms is longer than
//!   [`MAX_FUNCTION_LINES`] lines, unless a comment `// long function: <reason>` in the lines
//!   just above it says why: a protocol or an algorithm reads best split along its phases, each
//!   a function named for it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path from the crate root (`["engine", "threads", "sync"]`); the root is `[]`.
type ModPath = Vec<String>;

/// Every `.rs` file under `dir`, with its module path.
fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    fn walk(dir: &Path, prefix: &ModPath, out: &mut BTreeMap<ModPath, PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                let mut sub = prefix.clone();
                sub.push(name);
                walk(&p, &sub, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let mut m = prefix.clone();
                if !(name == "mod" || (prefix.is_empty() && name == "lib")) {
                    m.push(name);
                }
                out.insert(m, p);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, &Vec::new(), &mut out);
    out
}

/// `text` with comments, string and character literals blanked out (so that doc links and
/// messages are not read as imports).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').map_or(b.len(), |n| i + n);
            i = end;
        } else if rest.starts_with("/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if text[j..].starts_with("/*") {
                    depth += 1;
                    j += 2;
                } else if text[j..].starts_with("*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            out.push(' ');
            out.push_str(&newlines(&text[i..j]));
            i = j;
        } else if let Some(n) = raw_string_len(rest) {
            out.push_str("\"\"");
            out.push_str(&newlines(&text[i..i + n]));
            i += n;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            out.push_str(&newlines(&text[i..(j + 1).min(b.len())]));
            i = j + 1;
        } else if b[i] == b'\'' {
            // A character literal ('a', '\n', '\u{1F600}'), or a lifetime / label ('a).
            match char_literal_len(rest) {
                Some(n) => {
                    i += n;
                    out.push_str("' '");
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// As many line breaks as `s` has (what blanked-out text keeps, so that lines keep their
/// numbers).
fn newlines(s: &str) -> String {
    "\n".repeat(s.matches('\n').count())
}

/// The length of a raw (byte) string literal at the start of `s`, if one starts there.
fn raw_string_len(s: &str) -> Option<usize> {
    let body = s.strip_prefix("br").or_else(|| s.strip_prefix('r'))?;
    let hashes = body.len() - body.trim_start_matches('#').len();
    if !body[hashes..].starts_with('"') {
        return None;
    }
    let close = format!("\"{}", "#".repeat(hashes));
    let start = s.len() - body.len() + hashes + 1;
    let end = s[start..].find(&close)? + start + close.len();
    Some(end)
}

/// The length of a character literal at the start of `s`, if it is one (not a lifetime).
fn char_literal_len(s: &str) -> Option<usize> {
    let mut chars = s.char_indices().skip(1);
    let (_, c) = chars.next()?;
    if c == '\\' {
        let close = s[2..].find('\'')?;
        return Some(close + 3);
    }
    let (at, next) = chars.next()?;
    (next == '\'').then_some(at + 1)
}

/// `code` without its unit-test modules (`#[cfg(test)] mod tests { ... }`, and `cfg(all(test,
/// ...))`): a test may use anything.
fn without_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(") {
        let close = rest[at..].find(")]").map_or(rest.len(), |n| at + n + 2);
        let attr = &rest[at..close];
        let is_test = attr
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .any(|w| w == "test");
        let after = rest[close..].trim_start();
        if is_test && after.starts_with("mod ") {
            let open = close + rest[close..].find('{').unwrap_or(rest.len() - close);
            let mut depth = 0usize;
            let mut end = rest.len();
            for (i, c) in rest[open..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = open + i + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            out.push_str(&rest[..at]);
            rest = &rest[end..];
        } else {
            out.push_str(&rest[..close]);
            rest = &rest[close..];
        }
    }
    out.push_str(rest);
    out
}

/// The identifiers and `::`, `{`, `}`, `,` of `code`, in order (everything else dropped, and
/// an identifier preceded by a `.` or a letter-joined `::` of a type path kept as is).
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            // `r#ident`
            out.push(code[s..i].to_string());
            continue;
        }
        if code[i..].starts_with("::") {
            out.push("::".into());
            i += 2;
            continue;
        }
        match c {
            b'{' | b'}' | b',' | b';' | b'.' => out.push((c as char).to_string()),
            b' ' | b'\n' | b'\t' | b'\r' => {}
            _ => out.push("#".into()),
        }
        i += 1;
    }
    out
}

/// The module paths `tokens` name, as written (`crate::a::b`, `super::c`, `d::e` ...), with
/// `use` trees expanded.
fn paths(tokens: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        let starts = i + 1 < tokens.len()
            && tokens[i + 1] == "::"
            && (i == 0 || (tokens[i - 1] != "::" && tokens[i - 1] != "."))
            && t.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if starts {
            i = expand(tokens, i, Vec::new(), &mut out);
        } else {
            i += 1;
        }
    }
    out
}

/// Read a path (and a `{...}` tree after it) starting at `tokens[i]`, under `prefix`; push every
/// full path; return the index after it.
fn expand(
    tokens: &[String],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = prefix;
    while let Some(t) = tokens.get(i) {
        if t == "{" {
            i += 1;
            loop {
                match tokens.get(i).map(String::as_str) {
                    None => return i,
                    Some("}") => return i + 1,
                    Some(",") => i += 1,
                    Some(_) => i = expand(tokens, i, path.clone(), out),
                }
            }
        }
        if !t
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            break;
        }
        path.push(t.clone());
        i += 1;
        if tokens.get(i).map(String::as_str) == Some("::") {
            i += 1;
        } else {
            break;
        }
    }
    out.push(path);
    i
}

/// The module `path` (written in module `from`) refers to: the longest existing module that
/// is a prefix of its absolute form; `None` for other crates.
fn resolve(
    path: &[String],
    from: &ModPath,
    mods: &BTreeMap<ModPath, PathBuf>,
    root: &BTreeMap<String, ModPath>,
) -> Option<ModPath> {
    let (mut abs, rest): (ModPath, &[String]) = match path.first()?.as_str() {
        "crate" => {
            // An item the crate root re-exports (`crate::Ctx`) belongs to its module.
            if let Some(m) = path.get(1).and_then(|name| root.get(name)) {
                return Some(m.clone());
            }
            (Vec::new(), &path[1..])
        }
        "self" => (from.clone(), &path[1..]),
        "super" => {
            let mut base = from.clone();
            let mut rest = path;
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
            (base, rest)
        }
        first => {
            let mut child = from.clone();
            child.push(first.to_string());
            if mods.contains_key(&child) {
                (from.clone(), path)
            } else {
                return None;
            }
        }
    };
    let mut best = abs.clone();
    for seg in rest {
        abs.push(seg.clone());
        if mods.contains_key(&abs) {
            best = abs.clone();
        } else {
            break;
        }
    }
    Some(best)
}

fn name(m: &ModPath) -> String {
    if m.is_empty() {
        "lib".into()
    } else {
        m.join("::")
    }
}

/// The items the crate root re-exports from its modules (`pub use ctx::Ctx;` in lib.rs), by
/// name: `crate::Ctx` in a module is an import of `ctx`.
fn root_exports(mods: &BTreeMap<ModPath, PathBuf>) -> BTreeMap<String, ModPath> {
    let lib = std::fs::read_to_string(&mods[&Vec::new()]).unwrap();
    let code = without_test_modules(&code_only(&lib));
    let toks = tokens(&code);
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i + 2 < toks.len() {
        if toks[i] == "pub" && toks[i + 1] == "use" {
            let mut found = Vec::new();
            expand(&toks, i + 2, Vec::new(), &mut found);
            for p in found {
                let Some(name) = p.last() else { continue };
                if let Some(m) = resolve(&p, &Vec::new(), mods, &BTreeMap::new()) {
                    if !m.is_empty() {
                        out.insert(name.clone(), m);
                    }
                }
            }
        }
        i += 1;
    }
    out
}

/// Every module's imports of other modules (the crate root `lib.rs`, which declares and
/// re-exports everything, is left out).
fn graph(src: &Path) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mods = modules(src);
    let root = root_exports(&mods);
    let mut g = BTreeMap::new();
    for (m, file) in &mods {
        if m.is_empty() {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let code = code_only(&text);
        let code = without_test_modules(&code);
        let deps: BTreeSet<ModPath> = paths(&tokens(&code))
            .iter()
            .filter_map(|p| resolve(p, m, &mods, &root))
            .filter(|d| d != m && !d.is_empty())
            .collect();
        g.insert(m.clone(), deps);
    }
    g
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn cycles(g: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct T<'a> {
        g: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on: BTreeSet<&'a ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a ModPath) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let Some((w, _)) = t.g.get_key_value(w) else {
                continue;
            };
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn runtime_src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let g = graph(&runtime_src());
    assert!(g.len() > 30, "read only {} modules of runtime/src", g.len());
    let found: Vec<String> = cycles(&g)
        .iter()
        .map(|c| c.iter().map(name).collect::<Vec<_>>().join(", "))
        .collect();
    let imports = |m: &ModPath| g[m].iter().map(name).collect::<Vec<_>>().join(" ");
    let detail: Vec<String> = cycles(&g)
        .iter()
        .flatten()
        .map(|m| format!("  {} -> {}", name(m), imports(m)))
        .collect();
    assert!(
        found.is_empty(),
        "modules of runtime/src that import each other (directly or round a circle):\n{}\n\
         their imports:\n{}",
        found.join("\n"),
        detail.join("\n")
    );
}

/// Outside `engine/`, a module reaches the engines through the seam (`engine`) and the context;
/// only the starters of thread runs (`process`, `run`) make the thread engine's state.
#[test]
fn outside_the_engines_only_the_starters_of_runs_name_one() {
    let g = graph(&runtime_src());
    let starters = ["process", "run"];
    let mut wrong = Vec::new();
    for (m, deps) in &g {
        if m.first().map(String::as_str) == Some("engine") {
            continue;
        }
        for d in deps {
            let inside = d.len() >= 2 && d[0] == "engine" && (d[1] == "threads" || d[1] == "ranks");
            let state_only = d.len() == 3 && d[1] == "threads" && d[2] == "state";
            let allowed = state_only && starters.contains(&name(m).as_str());
            if inside && !allowed {
                wrong.push(format!("{} imports {}", name(m), name(d)));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "engine internals named outside engine/:\n{}",
        wrong.join("\n")
    );
}

/// The check finds a circle and the imports it is made of, however they are written.
#[test]
fn the_check_sees_imports_written_every_way() {
    let dir = std::env::temp_dir().join(format!("mbsp-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("e")).unwrap();
    let files = [
        ("lib.rs", "mod a; mod b; mod c; mod e; pub use c::Thing;"),
        (
            "a.rs",
            "use crate::{b::{self, X}, c};\n// use crate::d;\nfn f() { let _ = \"crate::e\"; }",
        ),
        ("b.rs", "pub struct X; fn g() -> crate::Thing { todo() }"),
        (
            "c.rs",
            "pub struct Thing; fn h() { super::e::inner::go(); }",
        ),
        ("e/mod.rs", "pub mod inner;"),
        (
            "e/inner.rs",
            "use super::super::a; #[cfg(test)] mod tests { use crate::b; }",
        ),
    ];
    for (f, text) in files {
        std::fs::write(dir.join(f), text).unwrap();
    }
    let g = graph(&dir);
    let deps = |m: &str| -> Vec<String> {
        let key: ModPath = m.split("::").map(String::from).collect();
        g[&key].iter().map(name).collect()
    };
    assert_eq!(deps("a"), ["b", "c"]);
    assert_eq!(deps("b"), ["c"]);
    assert_eq!(deps("c"), ["e::inner"]);
    assert_eq!(deps("e::inner"), ["a"]);
    let found = cycles(&g);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].iter().map(name).collect::<Vec<_>>(),
        ["a", "b", "c", "e::inner"]
    );
}

/// The longest a function may be without a stated reason (module documentation).
const MAX_FUNCTION_LINES: usize = 120;

/// The functions of `text` (one file), with their first line and length in lines, and whether
/// a `// long function:` comment just above says why it is long.
fn functions(text: &str) -> Vec<(String, usize, usize, bool)> {
    let code = code_only(text);
    let b = code.as_bytes();
    let lines: Vec<&str> = text.lines().collect();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(n) = code[at..].find("fn ") {
        let start = at + n;
        at = start + 3;
        if start > 0 && (b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_') {
            continue;
        }
        let name: String = code[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue; // `fn(` of a pointer type
        }
        // The body: the first `{` outside parentheses and brackets, unless a `;` ends the
        // declaration first (a trait method without a body).
        let (mut depth, mut i, mut open) = (0i32, at, None);
        while i < b.len() {
            match b[i] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    open = Some(i);
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        let Some(open) = open else { continue };
        let mut braces = 0;
        let mut close = open;
        for (k, &c) in b[open..].iter().enumerate() {
            match c {
                b'{' => braces += 1,
                b'}' => {
                    braces -= 1;
                    if braces == 0 {
                        close = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let first = line_of(start);
        let len = line_of(close) - first + 1;
        let above = lines[first.saturating_sub(8)..first - 1].iter();
        let reason = above
            .clone()
            .any(|l| l.trim_start().starts_with("// long function:"));
        out.push((name, first, len, reason));
    }
    out
}

/// Every function longer than [`MAX_FUNCTION_LINES`] without a reason, under `dir`.
fn long_functions(dir: &Path) -> Vec<String> {
    let mut long = Vec::new();
    for file in modules(dir).values() {
        let text = std::fs::read_to_string(file).unwrap();
        for (name, line, len, reason) in functions(&text) {
            if len > MAX_FUNCTION_LINES && !reason {
                long.push(format!("{}:{line}: fn {name}: {len} lines", file.display()));
            }
        }
    }
    long
}

#[test]
fn no_function_is_long_without_a_reason() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut long = Vec::new();
    let mut seen = 0;
    for krate in ["runtime", "capi", "algorithms"] {
        let src = root.join(krate).join("src");
        seen += modules(&src).len();
        long.extend(long_functions(&src));
    }
    assert!(
        seen > 100,
        "read only {seen} files of runtime, capi and algorithms"
    );
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines with no `// long function: <reason>` above \
         them (split them along their phases):\n{}",
        long.join("\n")
    );
}

/// The length check finds functions however they are written, and reads the reason.
#[test]
fn the_length_check_measures_functions() {
    let body = |n: usize| "    x();\n".repeat(n);
    let text = format!(
        "/// A doc comment: fn not_a_function() {{\nfn short() {{\n{}}}\n\
         // long function: its phases share too much state\nfn excused<T: Fn(u8) -> u8>(f: T)\n\
         where\n    T: Copy,\n{{\n    let s = \"}} fn fake() {{\";\n{}}}\n\
         trait T {{ fn declared(&self); }}\n\
         fn long(a: [u8; 2]) -> impl Fn() {{\n    /* {{ */\n{}    move || {{}}\n}}\n",
        body(3),
        body(200),
        body(130)
    );
    let found: Vec<(String, usize, bool)> = functions(&text)
        .into_iter()
        .map(|(name, _, len, reason)| (name, len, reason))
        .collect();
    assert_eq!(
        found,
        [
            ("short".to_string(), 5, false),
            ("excused".to_string(), 206, true),
            ("long".to_string(), 134, false),
        ]
    );
}
