use super::*;

fn whole(bytes: &[u8]) -> DecodedText {
    decode(bytes, Input::Whole).expect("text")
}

#[test]
fn utf8_is_utf8_and_a_cut_character_at_the_end_of_a_prefix_is_left_out() {
    let decoded = whole("héllo\n".as_bytes());
    assert_eq!(decoded.text, "héllo\n");
    assert!(decoded.encoding.is_plain_utf8());
    let cut = &"hé".as_bytes()[..2];
    let prefix = decode(cut, Input::Prefix).expect("prefix");
    assert_eq!((prefix.text.as_str(), prefix.encoding.name()), ("h", "UTF-8"));
}

#[test]
fn a_utf8_byte_order_mark_is_kept_out_of_the_text_and_written_back() {
    let decoded = whole(b"\xEF\xBB\xBFa\r\n");
    assert_eq!(decoded.text, "a\r\n");
    assert_eq!(decoded.encoding.describe(), "UTF-8 with a byte-order mark");
    assert_eq!(decoded.encoding.encode("b").expect("encodes"), b"\xEF\xBB\xBFb");
}

#[test]
fn latin1_is_windows_1252_and_every_byte_round_trips() {
    let decoded = whole(b"Caf\xe9 cr\xe8me \x80\n");
    assert_eq!(decoded.text, "Café crème €\n");
    assert_eq!(decoded.encoding.name(), "windows-1252");
    assert_eq!(decoded.first_non_utf8_line, Some(1));
    // Every byte but NUL, the five C1 holes of windows-1252 included.
    let all: Vec<u8> = (1..=255).collect();
    let decoded = whole(&all);
    assert!(decoded.round_trips(&all), "{}", decoded.encoding.name());
    assert!(!decoded.text.contains('\u{FFFD}'));
}

#[test]
fn utf16_with_a_byte_order_mark_decodes_and_encodes_with_the_mark() {
    let le = b"\xFF\xFEa\x00\n\x00";
    let decoded = whole(le);
    assert_eq!((decoded.text.as_str(), decoded.encoding.name()), ("a\n", "UTF-16LE"));
    assert_eq!(decoded.encoding.encode("a\n").expect("encodes"), le);
    assert!(decoded.encoding.has_bom() && decoded.encoding.holds_every_character());
    let be = b"\xFE\xFF\x00a\xD8\x3D\xDE\x00";
    let decoded = whole(be);
    assert_eq!(decoded.text, "a😀");
    assert!(decoded.round_trips(be));
}

#[test]
fn a_byte_order_mark_that_lies_is_refused_not_guessed_around() {
    let utf16le = whole(b"\xFF\xFE").encoding;
    let utf8_bom = whole(b"\xEF\xBB\xBF").encoding;
    assert_eq!(decode(b"\xFF\xFEa\x00b", Input::Whole), Err(NotText::BadBom(utf16le)));
    // A lone surrogate.
    assert_eq!(
        decode(b"\xFF\xFE\x00\xD8a\x00", Input::Whole),
        Err(NotText::BadBom(utf16le))
    );
    // A prefix may stop inside a character: that is the cut, not a lie.
    let prefix = decode(b"\xFF\xFEa\x00b", Input::Prefix).expect("prefix");
    assert_eq!(prefix.text, "a");
    assert_eq!(
        decode(b"\xEF\xBB\xBFcaf\xe9", Input::Whole),
        Err(NotText::BadBom(utf8_bom))
    );
    assert_eq!(
        NotText::BadBom(utf16le).to_string(),
        "not valid UTF-16LE although it starts with a UTF-16LE byte-order mark"
    );
}

#[test]
fn nul_bytes_make_a_file_binary_wherever_they_are() {
    let mut late = vec![b'a'; 100_000];
    late.push(0);
    assert_eq!(decode(&late, Input::Whole), Err(NotText::Binary));
    assert_eq!(decode(b"a\x00\xe9", Input::Whole), Err(NotText::Binary));
    // UTF-16 without a mark is binary; with a mark, a U+0000 character is binary too.
    assert_eq!(decode(b"a\x00b\x00", Input::Whole), Err(NotText::Binary));
    assert_eq!(decode(b"\xFF\xFEa\x00\x00\x00", Input::Whole), Err(NotText::Binary));
    assert_eq!(decode(&[], Input::Whole).map(|d| d.text), Ok(String::new()));
}

#[test]
fn shift_jis_is_detected_and_refuses_what_it_cannot_hold() {
    let text = "日本語のテキストファイルです。\n東京都の天気は晴れです。\n";
    let (bytes, _, _) = encoding_rs::SHIFT_JIS.encode(text);
    let decoded = whole(&bytes);
    assert_eq!(decoded.encoding.name(), "Shift_JIS");
    assert_eq!(decoded.text, text);
    assert!(decoded.round_trips(&bytes));
    assert_eq!(
        decoded.encoding.encode("5 €").map_err(|e| e.to_string()),
        Err("€ (U+20AC) cannot be written in Shift_JIS".to_owned())
    );
}

#[test]
fn windows_1252_holds_the_euro_but_not_an_arrow() {
    let latin = whole(b"caf\xe9\n").encoding;
    assert_eq!(latin.encode("€").expect("encodes"), b"\x80");
    assert_eq!(
        latin.encode("a → b"),
        Err(Unencodable::Character {
            character: '→',
            encoding: "windows-1252"
        })
    );
}

#[test]
fn mixed_encodings_keep_their_bytes_and_say_where_utf8_stops() {
    let mixed = "line one é\nline two ".bytes().chain(*b"caf\xe9\n").collect::<Vec<_>>();
    let decoded = whole(&mixed);
    assert!(!decoded.encoding.is_plain_utf8());
    assert_eq!(decoded.first_non_utf8_line, Some(2));
    assert!(decoded.round_trips(&mixed), "bytes kept exactly");
    assert!(!decoded.text.contains('\u{FFFD}'));
}

#[test]
fn a_shift_jis_byte_pair_with_two_spellings_does_not_round_trip() {
    // 0xED40 (NEC-selected IBM extension) decodes to U+7E8A, which encodes as 0xFA5C.
    let bytes = b"\x93\xfa\x96\x7b\x8c\xea\xed\x40\x82\xc5\x82\xb7\x81\x42\n".repeat(4);
    let decoded = whole(&bytes);
    assert_eq!(decoded.encoding.name(), "Shift_JIS");
    assert!(!decoded.round_trips(&bytes));
    assert!(!decoded.text.contains('\u{FFFD}'));
}

#[test]
fn control_characters_in_a_refusal_are_escaped() {
    let latin = whole(b"caf\xe9").encoding;
    let message = latin.encode("\u{1b}[31m→").map_err(|e| e.to_string());
    assert_eq!(message, Err("→ (U+2192) cannot be written in windows-1252".to_owned()));
    assert_eq!(
        Unencodable::Character {
            character: '\u{7}',
            encoding: "x"
        }
        .to_string(),
        "\\u{7} (U+0007) cannot be written in x"
    );
}

#[test]
fn a_byte_order_mark_written_by_the_model_is_not_doubled() {
    let utf16 = whole(b"\xFF\xFEa\x00").encoding;
    assert_eq!(utf16.encode("\u{FEFF}b").expect("encodes"), b"\xFF\xFEb\x00");
    assert_eq!(
        TextEncoding::UTF8.encode("\u{FEFF}b").expect("encodes"),
        "\u{FEFF}b".as_bytes()
    );
}

#[test]
fn a_legacy_prefix_cut_inside_a_character_leaves_it_out() {
    let text = "日本語のテキストファイルです。東京都の天気は晴れです。";
    let (bytes, _, _) = encoding_rs::SHIFT_JIS.encode(text);
    let cut = &bytes[..bytes.len() - 1];
    let decoded = decode(cut, Input::Prefix).expect("prefix");
    assert_eq!(decoded.encoding.name(), "Shift_JIS");
    assert_eq!(decoded.text, text.trim_end_matches('。'));
}

/// read_file reads up to 16 MiB and write_file 1 MiB of the same file: both must guess alike,
/// or a rewrite would change the encoding the model was shown.
#[test]
fn a_large_file_is_guessed_from_its_beginning_by_every_reader() {
    let line = "日本語のテキストファイルです。東京都の天気は晴れです。\n";
    let text = line.repeat(20_000);
    let (bytes, _, _) = encoding_rs::SHIFT_JIS.encode(&text);
    assert!(bytes.len() > MAX_DETECT_BYTES);
    let whole = decode(&bytes, Input::Whole).expect("whole");
    let prefix = decode(&bytes[..MAX_DETECT_BYTES], Input::Prefix).expect("prefix");
    assert_eq!(whole.encoding, prefix.encoding);
    assert_eq!(whole.encoding.name(), "Shift_JIS");
}
