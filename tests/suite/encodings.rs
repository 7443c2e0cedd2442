//! Files are bytes: text that is not UTF-8 is read decoded with its encoding named, edited and
//! rewritten in that same encoding (byte-order mark and line endings kept), a character the
//! encoding cannot hold is refused, and binary files are refused. Each test commits real
//! encoded files, runs the binary with a replay script and compares the bytes committed on the
//! bot branch.

use std::process::Command;

use serde_json::{Value, json};

use super::support::{Script, TestRepo, finish, reply, run_local};

/// The replacement character U+FFFD as UTF-8: what a lossy decode leaves behind.
const REPLACEMENT: &[u8] = b"\xEF\xBF\xBD";

/// A repository whose first commit holds `files` with exactly these bytes.
fn repo_with_bytes(files: &[(&str, &[u8])]) -> TestRepo {
    let repo = TestRepo::with_files(&[("README.md", "# Sample\n")]);
    for (path, bytes) in files {
        std::fs::write(repo.path().join(path), bytes).expect("write");
    }
    repo.commit("Add encoded files");
    repo
}

/// The bytes of `path` at `rev`, exactly as git stores them.
fn committed(repo: &TestRepo, rev: &str, path: &str) -> Vec<u8> {
    let output = Command::new("git")
        .current_dir(repo.path())
        .args(["show", &format!("{rev}:{path}")])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git show {rev}:{path}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// The only bot branch the run left.
fn bot_branch(repo: &TestRepo) -> String {
    let branches = repo.bot_branches();
    assert_eq!(branches.len(), 1, "one bot branch: {branches:?}");
    branches[0].clone()
}

fn output_of(result: &Value) -> &str {
    result["output"].as_str().unwrap_or("")
}

fn utf16(text: &str, little_endian: bool) -> Vec<u8> {
    let mut bytes = if little_endian {
        vec![0xFF, 0xFE]
    } else {
        vec![0xFE, 0xFF]
    };
    for unit in text.encode_utf16() {
        bytes.extend(if little_endian {
            unit.to_le_bytes()
        } else {
            unit.to_be_bytes()
        });
    }
    bytes
}

fn shift_jis(text: &str) -> Vec<u8> {
    let (bytes, _, unmappable) = encoding_rs::SHIFT_JIS.encode(text);
    assert!(!unmappable, "test text fits Shift_JIS");
    bytes.into_owned()
}

const JAPANESE: &str =
    "日本語のテキストファイルです。\nこの文章はシフトJISで書かれています。\n東京都の天気は晴れです。\n";

fn read_then(path: &str, calls: &[(&str, Value)]) -> Vec<String> {
    let mut all = calls.to_vec();
    all.push((
        "create_pull_request",
        json!({"title": "Update text", "body": "Updates the text."}),
    ));
    vec![
        reply("read", &[("read_file", json!({"path": path}))]),
        reply("change and propose", &all),
        finish("completed"),
    ]
}

/// Before, a latin-1 file was shown with U+FFFD in place of every accented letter and
/// `edit_file` refused it, so the model fell back to `write_file`, which committed UTF-8.
#[test]
fn latin1_file_is_read_decoded_and_edited_in_latin1_with_its_crlf() {
    let repo = repo_with_bytes(&[("notes.txt", b"Caf\xe9 cr\xe8me\r\nna\xefve\r\n")]);
    let script = Script::new(&read_then(
        "notes.txt",
        &[(
            "edit_file",
            json!({"path": "notes.txt", "old_text": "Café crème\n", "new_text": "Café crème brûlée à 5 €\n"}),
        )],
    ));
    let out = run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(0);
    let read = &out.results_of("read_file")[0];
    assert_eq!(read["ok"], true, "{read}");
    assert!(output_of(read).contains("Café crème\r\nnaïve"), "{read}");
    assert!(output_of(read).contains("windows-1252"), "encoding named: {read}");
    let branch = bot_branch(&repo);
    assert_eq!(
        committed(&repo, &branch, "notes.txt"),
        b"Caf\xe9 cr\xe8me br\xfbl\xe9e \xe0 5 \x80\r\nna\xefve\r\n".to_vec()
    );
}

/// Before, a UTF-16 file was refused as binary (its NUL bytes), skipped by `search_files`, and
/// `write_file` replaced it with UTF-8, dropping the byte-order mark.
#[test]
fn utf16_le_file_with_bom_is_rewritten_in_utf16_le_with_its_bom() {
    let repo = repo_with_bytes(&[("strings.txt", &utf16("Grüße\r\nWelt\r\n", true))]);
    let mut replies = vec![reply("search", &[("search_files", json!({"pattern": "Grü(ß|ss)e"}))])];
    replies.extend(read_then(
        "strings.txt",
        &[(
            "write_file",
            json!({"path": "strings.txt", "content": "Grüße\nschöne Welt 😀"}),
        )],
    ));
    let out = run_local(&repo, &Script::new(&replies), &["--task", "t"]);
    out.assert_code(0);
    let search = &out.results_of("search_files")[0];
    assert_eq!(output_of(search), "strings.txt:1: Grüße", "searched decoded: {search}");
    let read = &out.results_of("read_file")[0];
    assert_eq!(read["ok"], true, "{read}");
    assert!(output_of(read).contains("Grüße\r\nWelt"), "{read}");
    assert!(output_of(read).contains("UTF-16LE"), "encoding named: {read}");
    let branch = bot_branch(&repo);
    assert_eq!(
        committed(&repo, &branch, "strings.txt"),
        utf16("Grüße\r\nschöne Welt 😀\r\n", true)
    );
}

#[test]
fn utf16_be_file_with_bom_is_edited_in_utf16_be() {
    let repo = repo_with_bytes(&[("strings.txt", &utf16("one\ntwo\nthree\n", false))]);
    let script = Script::new(&read_then(
        "strings.txt",
        &[(
            "edit_file",
            json!({"path": "strings.txt", "old_text": "two", "new_text": "zwei"}),
        )],
    ));
    let out = run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(0);
    assert!(output_of(&out.results_of("read_file")[0]).contains("UTF-16BE"));
    let branch = bot_branch(&repo);
    assert_eq!(
        committed(&repo, &branch, "strings.txt"),
        utf16("one\nzwei\nthree\n", false)
    );
}

#[test]
fn shift_jis_file_is_read_decoded_and_edited_in_shift_jis() {
    let repo = repo_with_bytes(&[("jp.txt", &shift_jis(JAPANESE))]);
    let script = Script::new(&read_then(
        "jp.txt",
        &[(
            "edit_file",
            json!({"path": "jp.txt", "old_text": "晴れです", "new_text": "雨です"}),
        )],
    ));
    let out = run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(0);
    let read = &out.results_of("read_file")[0];
    assert!(output_of(read).contains("東京都の天気は晴れです。"), "{read}");
    assert!(output_of(read).contains("Shift_JIS"), "encoding named: {read}");
    let branch = bot_branch(&repo);
    assert_eq!(
        committed(&repo, &branch, "jp.txt"),
        shift_jis(&JAPANESE.replace("晴れです", "雨です"))
    );
}

/// A character the file's encoding cannot hold is refused by name, never written as something
/// else; nothing committed holds U+FFFD. Windows-1252 holds `€` (0x80) but not `→`.
#[test]
fn a_character_the_encoding_cannot_hold_is_refused_and_nothing_mangled_is_committed() {
    let latin = b"Caf\xe9\nPrice: 5\n".to_vec();
    let japanese = shift_jis(JAPANESE);
    let repo = repo_with_bytes(&[("jp.txt", &japanese), ("latin.txt", &latin)]);
    let script = Script::new(&[
        reply(
            "euro in Shift_JIS",
            &[(
                "edit_file",
                json!({"path": "jp.txt", "old_text": "晴れです", "new_text": "5 €です"}),
            )],
        ),
        reply(
            "arrow in windows-1252",
            &[(
                "write_file",
                json!({"path": "latin.txt", "content": "Café → bar\nPrice: 5\n"}),
            )],
        ),
        reply(
            "euro in windows-1252 and propose",
            &[
                (
                    "edit_file",
                    json!({"path": "latin.txt", "old_text": "Price: 5", "new_text": "Price: 5 €"}),
                ),
                (
                    "create_pull_request",
                    json!({"title": "Update text", "body": "Updates the text."}),
                ),
            ],
        ),
        finish("completed"),
    ]);
    let out = run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(0);
    let edits = out.results_of("edit_file");
    assert_eq!(edits[0]["ok"], false, "{}", edits[0]);
    assert!(
        output_of(&edits[0]).contains("€") && output_of(&edits[0]).contains("Shift_JIS"),
        "{}",
        edits[0]
    );
    let write = &out.results_of("write_file")[0];
    assert_eq!(write["ok"], false, "{write}");
    assert!(
        output_of(write).contains("→") && output_of(write).contains("windows-1252"),
        "{write}"
    );
    assert_eq!(edits[1]["ok"], true, "{}", edits[1]);
    let branch = bot_branch(&repo);
    assert_eq!(committed(&repo, &branch, "jp.txt"), japanese);
    assert_eq!(
        committed(&repo, &branch, "latin.txt"),
        b"Caf\xe9\nPrice: 5 \x80\n".to_vec()
    );
    let diff = Command::new("git")
        .current_dir(repo.path())
        .args(["diff", "main", &branch])
        .output()
        .expect("git diff");
    assert!(!diff.stdout.windows(3).any(|w| w == REPLACEMENT), "no U+FFFD committed");
}

/// Before, only the first 8 KiB were looked at for NUL bytes, so a binary file with a text
/// header was shown with U+FFFD for its bytes, `edit_file` edited a NUL-holding file, and a
/// file with a UTF-16 mark was rewritten as UTF-8.
#[test]
fn binary_files_are_refused_by_read_file_and_edit_file() {
    let mut pdf = b"%PDF-1.7\n".to_vec();
    pdf.extend(std::iter::repeat_n(b"% header text line\n".as_slice(), 600).flatten());
    pdf.extend(b"stream\n\x00\x01\x02\xff\xfe\x00\x89PNG\x00\x00endstream\n");
    let mut blob = b"HEADER old\n".to_vec();
    blob.extend([0, 0, 0, 1, 2, 3]);
    // A byte-order mark that lies: UTF-16 cannot have an odd number of bytes.
    let mut odd = utf16("text", true);
    odd.push(b'x');
    let repo = repo_with_bytes(&[("doc.pdf", &pdf), ("data.bin", &blob), ("odd.txt", &odd)]);
    let script = Script::new(&[
        reply("read pdf", &[("read_file", json!({"path": "doc.pdf"}))]),
        reply("read odd", &[("read_file", json!({"path": "odd.txt"}))]),
        reply(
            "edit blob",
            &[(
                "edit_file",
                json!({"path": "data.bin", "old_text": "old", "new_text": "new"}),
            )],
        ),
        reply(
            "replace the broken file whole",
            &[
                ("write_file", json!({"path": "odd.txt", "content": "fixed\n"})),
                (
                    "create_pull_request",
                    json!({"title": "Fix odd", "body": "Rewrites odd.txt."}),
                ),
            ],
        ),
        finish("completed"),
    ]);
    let out = run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(0);
    let reads = out.results_of("read_file");
    assert_eq!(reads[0]["ok"], false, "{}", reads[0]);
    assert!(output_of(&reads[0]).contains("binary"), "{}", reads[0]);
    assert_eq!(reads[1]["ok"], false, "{}", reads[1]);
    assert!(output_of(&reads[1]).contains("UTF-16LE"), "{}", reads[1]);
    let edit = &out.results_of("edit_file")[0];
    assert_eq!(edit["ok"], false, "{edit}");
    assert!(output_of(edit).contains("binary"), "{edit}");
    // A whole new content for the file with the lying mark keeps the encoding the mark names.
    let branch = bot_branch(&repo);
    assert_eq!(committed(&repo, &branch, "odd.txt"), utf16("fixed\n", true));
    assert_eq!(committed(&repo, &branch, "data.bin"), blob);
}

/// Some Shift_JIS characters have two byte sequences (0xED40 and 0xFA5C are both U+7E8A):
/// writing the decoded text back would change bytes the edit never touched, so `edit_file`
/// refuses the file and `read_file` says it will.
#[test]
fn edit_file_refuses_a_file_whose_text_would_not_encode_back_to_its_bytes() {
    let mut bytes = shift_jis(JAPANESE);
    bytes.extend(b"\x93\xfa\x96\x7b\x8c\xea\xed\x40\x82\xc5\x82\xb7\x81\x42\n");
    let repo = repo_with_bytes(&[("jp.txt", &bytes)]);
    let script = Script::new(&[
        reply("read", &[("read_file", json!({"path": "jp.txt"}))]),
        reply(
            "edit",
            &[(
                "edit_file",
                json!({"path": "jp.txt", "old_text": "晴れです", "new_text": "雨です"}),
            )],
        ),
        finish("no_tasks"),
    ]);
    let out = run_local(&repo, &script, &["--task", "t"]);
    out.assert_code(0);
    let read = &out.results_of("read_file")[0];
    assert!(output_of(read).contains("edit_file refuses it"), "{read}");
    let edit = &out.results_of("edit_file")[0];
    assert_eq!(edit["ok"], false, "{edit}");
    assert!(output_of(edit).contains("byte for byte"), "{edit}");
    assert!(repo.bot_branches().is_empty());
}
