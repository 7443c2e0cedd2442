//! The layout is part of the design (DESIGN.md section 9): data flows one way between the
//! library's top-level modules, no module grows past about 500 lines, and docs/development.md
//! names every module. These checks read the source as text, so anyone can run them with
//! `cargo test --test all layout`; each is also fed a broken case, so it can fail.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

/// The most lines a module of the library, a benchmark or an example may have ("about 500" in
/// the design).
const MAX_LINES: usize = 500;

fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, as paths relative to the project, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source folder is readable") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                found.push(
                    path.strip_prefix(project_root())
                        .expect("under the project")
                        .to_path_buf(),
                );
            }
        }
    }
    found.sort();
    found
}

/// The top-level module a file of `src/` belongs to (`src/repo/fs.rs` -> `repo`), or `None` for
/// the crate roots.
fn top_module(path: &Path) -> Option<String> {
    let inside = path.strip_prefix("src").ok()?;
    let first = inside.components().next()?.as_os_str().to_string_lossy().into_owned();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
    (name != "lib" && name != "main").then_some(name)
}

/// Whether a file holds only unit tests (a sibling `*_tests.rs` or `tests.rs`).
fn is_test_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name == "tests.rs" || name.ends_with("_tests.rs"))
}

/// The top-level modules each module's code (not its unit tests) names through `crate::`.
fn module_imports(sources: &[(PathBuf, String)]) -> BTreeMap<String, BTreeMap<String, String>> {
    let named = Regex::new(r"crate::([a-z_][a-z0-9_]*)").expect("a valid pattern");
    let mut imports: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (path, text) in sources {
        let Some(from) = top_module(path) else { continue };
        if is_test_file(path) {
            continue;
        }
        imports.entry(from.clone()).or_default();
        for (number, line) in text.lines().enumerate() {
            // Inline unit tests sit at the end of a file, after `#[cfg(test)]`.
            if line.trim_start().starts_with("#[cfg(test)]") {
                break;
            }
            if line.trim_start().starts_with("//") {
                continue;
            }
            for capture in named.captures_iter(line) {
                let to = capture[1].to_owned();
                if to != from {
                    imports
                        .entry(from.clone())
                        .or_default()
                        .entry(to)
                        .or_insert_with(|| format!("{}:{}", path.display(), number + 1));
                }
            }
        }
    }
    imports
}

/// The import cycles between top-level modules: each strongly connected group of more than one
/// module, with one import that ties each member to the next (Tarjan's algorithm).
fn cycles(imports: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    struct Search<'a> {
        imports: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        groups: Vec<Vec<String>>,
    }
    impl<'a> Search<'a> {
        fn visit(&mut self, module: &'a str) {
            let order = self.index.len();
            self.index.insert(module, order);
            self.low.insert(module, order);
            self.stack.push(module);
            self.on_stack.insert(module);
            for next in self.imports.get(module).into_iter().flat_map(|to| to.keys()) {
                if !self.imports.contains_key(next.as_str()) {
                    continue;
                }
                if !self.index.contains_key(next.as_str()) {
                    self.visit(next);
                    let low = self.low[next.as_str()].min(self.low[module]);
                    self.low.insert(module, low);
                } else if self.on_stack.contains(next.as_str()) {
                    let low = self.index[next.as_str()].min(self.low[module]);
                    self.low.insert(module, low);
                }
            }
            if self.low[module] == self.index[module] {
                let mut group = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    group.push(member.to_owned());
                    if member == module {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.groups.push(group);
                }
            }
        }
    }
    let mut search = Search {
        imports,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        groups: Vec::new(),
    };
    for module in imports.keys() {
        if !search.index.contains_key(module.as_str()) {
            search.visit(module);
        }
    }
    search.groups
}

/// How a cycle is tied: every import between two of its members, with where it is.
fn describe(group: &[String], imports: &BTreeMap<String, BTreeMap<String, String>>) -> String {
    let mut lines = Vec::new();
    for from in group {
        for (to, place) in &imports[from] {
            if group.contains(to) {
                lines.push(format!("  {from} -> {to} ({place})"));
            }
        }
    }
    format!("[{}]\n{}", group.join(", "), lines.join("\n"))
}

fn sources(files: &[PathBuf]) -> Vec<(PathBuf, String)> {
    files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(project_root().join(path)).expect("a readable source file");
            (path.clone(), text)
        })
        .collect()
}

#[test]
fn top_level_modules_import_each_other_one_way() {
    let sources = sources(&rust_files(&project_root().join("src")));
    let imports = module_imports(&sources);
    let found = cycles(&imports);
    let described: Vec<String> = found.iter().map(|group| describe(group, &imports)).collect();
    assert!(
        found.is_empty(),
        "import cycles between top-level modules of src/:\n{}",
        described.join("\n")
    );
}

#[test]
fn the_cycle_check_sees_a_cycle() {
    let broken = vec![
        (PathBuf::from("src/alpha.rs"), "use crate::beta::B;\n".to_owned()),
        (PathBuf::from("src/beta/mod.rs"), "use crate::alpha::A;\n".to_owned()),
        (
            PathBuf::from("src/beta/x_tests.rs"),
            "use crate::gamma::C;\n".to_owned(),
        ),
        (
            PathBuf::from("src/gamma.rs"),
            "#[cfg(test)]\nuse crate::alpha::A;\n".to_owned(),
        ),
    ];
    let found = cycles(&module_imports(&broken));
    assert_eq!(found, vec![vec!["alpha".to_owned(), "beta".to_owned()]]);
}

#[test]
fn no_source_file_is_over_the_size_limit() {
    let root = project_root();
    let mut over = Vec::new();
    for dir in ["src", "benches", "examples"] {
        for path in rust_files(&root.join(dir)) {
            let lines = std::fs::read_to_string(root.join(&path))
                .expect("readable")
                .lines()
                .count();
            if lines > MAX_LINES {
                over.push(format!("{} ({lines} lines)", path.display()));
            }
        }
    }
    assert!(over.is_empty(), "over {MAX_LINES} lines: {over:?}");
}

/// The module paths docs/development.md's layout names, as written there (`src/repo/fs.rs`).
fn documented_modules(page: &str) -> BTreeSet<String> {
    let path = Regex::new(r"src/[A-Za-z0-9_/]+(?:\.rs|/)").expect("a valid pattern");
    path.find_iter(page).map(|found| found.as_str().to_owned()).collect()
}

/// The modules of `src/` that docs/development.md does not name: every file except unit-test
/// files, a folder's `mod.rs` being named by the folder (`src/repo/`).
fn undocumented(files: &[PathBuf], documented: &BTreeSet<String>) -> Vec<String> {
    files
        .iter()
        .filter(|path| !is_test_file(path))
        .map(|path| {
            let text = path.to_string_lossy().replace('\\', "/");
            match text.strip_suffix("mod.rs") {
                Some(folder) => folder.to_owned(),
                None => text,
            }
        })
        .filter(|name| !documented.contains(name))
        .collect()
}

#[test]
fn the_development_guide_names_every_module() {
    let root = project_root();
    let page = std::fs::read_to_string(root.join("docs/development.md")).expect("docs/development.md");
    let missing = undocumented(&rust_files(&root.join("src")), &documented_modules(&page));
    assert!(
        missing.is_empty(),
        "modules docs/development.md does not name: {missing:?}"
    );
}

#[test]
fn the_module_list_check_sees_a_missing_module() {
    let files = vec![
        PathBuf::from("src/repo/mod.rs"),
        PathBuf::from("src/repo/fs.rs"),
        PathBuf::from("src/repo/fs_tests.rs"),
        PathBuf::from("src/text.rs"),
    ];
    let documented = documented_modules("src/repo/   the gate\nsrc/repo/fs.rs   files\n");
    assert_eq!(undocumented(&files, &documented), vec!["src/text.rs".to_owned()]);
}
