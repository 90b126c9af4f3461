use super::*;

#[test]
fn codes() {
    for ok in ["imagenet", "coco-2017", "a_b", "9lives"] {
        assert_eq!(code(ok), Ok(()), "{ok}");
    }
    for bad in ["", "Upper", "-lead", "with space", "dot.ted", "é"] {
        assert!(code(bad).is_err(), "{bad}");
    }
    assert!(matches!(code(&"a".repeat(65)), Err(DatasetRuleError::TooLong { .. })));
}

#[test]
fn versions() {
    for ok in ["v1", "2024-06", "baseline.1", "V_2"] {
        assert_eq!(version(ok), Ok(()), "{ok}");
    }
    for bad in ["", ".", "..", ".hidden", "a/b", "v 1"] {
        assert!(version(bad).is_err(), "{bad}");
    }
}

#[test]
fn file_names_cannot_climb_out() {
    for ok in ["a.jpg", "train/cat 1.jpg", "é.txt", "x/y/z.bin", "..a"] {
        assert_eq!(file_name(ok), Ok(()), "{ok}");
    }
    for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/.", "a\\..\\b", "nl\nx", "tab\tx", "a/"] {
        assert!(file_name(bad).is_err(), "{bad:?}");
    }
    for disguised in
        ["report\u{202E}fdp.exe", "a\u{200B}b.txt", "\u{2066}x\u{2069}.bin", "\u{FEFF}a.txt", "soft\u{AD}hyphen.txt"]
    {
        let refused = file_name(disguised).unwrap_err().to_string();
        assert!(refused.contains("invisible and text-direction characters"), "{disguised:?}: {refused}");
    }
    assert!(file_name(&"a".repeat(256)).is_err());
    assert!(file_name(&format!("{}/{}", "a".repeat(255), "b".repeat(255))).is_ok());
    assert!(file_name(&vec!["abcd"; 300].join("/")).is_err());
}

#[test]
fn keys_put_the_category_between_version_and_file() {
    assert_eq!(storage_key("coco", "v1", "images", "train/a.jpg"), "coco/v1/images/train/a.jpg");
    assert_eq!(version_prefix("coco", "v1"), "coco/v1/");
}

#[test]
fn quota_counts_reservations_and_names_the_numbers() {
    assert!(check_quota("ml", 100, 40, 10, 50).is_ok());
    let refusal = check_quota("ml", 2048, 1024, 0, 2048).unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "group ml holds 1.0 KiB of its 2.0 KiB dataset quota; this file needs 2.0 KiB more"
    );
    let refusal = check_quota("ml", 100, 40, 30, 31).unwrap_err();
    assert!(refusal.to_string().contains("(and 30 B reserved by uploads in progress)"), "{refusal}");
    assert!(check_quota("ml", u64::MAX, u64::MAX, u64::MAX, 1).is_err());
}

#[test]
fn categories_and_visibility() {
    assert!(category("images").is_ok());
    assert!(category("pictures").is_err());
    assert_eq!(Visibility::parse("public"), Ok(Visibility::Public));
    assert!(Visibility::parse("world").is_err());
}

#[test]
fn format_characters_and_line_separators_are_refused_like_the_other_invisible_ones() {
    // Tags (U+E0000–E007F) display as nothing: `report\u{E0041}.pdf` looks like `report.pdf`.
    for disguised in [
        "report\u{E0041}.pdf",
        "a\u{E0001}b",
        "a\u{E007F}b",
        "a\u{2028}b",
        "a\u{2029}b",
        "a\u{0600}b",
        "a\u{06DD}b",
        "a\u{070F}b",
        "a\u{0890}b",
        "a\u{08E2}b",
        "a\u{110BD}b",
        "a\u{13430}b",
        "a\u{1BCA0}b",
        "a\u{1D173}b",
        "\u{3164}.txt",
        "a\u{115F}b",
        "a\u{FFA0}b",
        "a\u{034F}b",
    ] {
        let refused = file_name(disguised).map_err(|e| e.to_string());
        assert!(
            refused.as_ref().is_err_and(|e| e.contains("invisible and text-direction characters")),
            "{disguised:?}: {refused:?}"
        );
    }
    // Visible letters and an emoji's presentation selector stay allowed.
    for ok in ["naïve.txt", "数据/说明.bin", "\u{2764}\u{FE0F}.png", "Ελληνικά.csv"] {
        assert_eq!(file_name(ok), Ok(()), "{ok}");
    }
}

#[test]
fn lengths_count_a_name_as_an_object_store_keeps_it() {
    // 80 CJK characters are 240 bytes, 720 once percent-encoded in the key.
    let cjk = "长".repeat(80);
    let refused = file_name(&format!("{cjk}/{cjk}/{cjk}/a.bin")).unwrap_err().to_string();
    assert!(refused.contains("bytes as stored"), "{refused}");
    let refused = file_name(&format!("{cjk}/a.bin")).unwrap_err().to_string();
    assert!(refused.contains("a path segment is longer than 255 bytes as stored"), "{refused}");
    // 28 characters of 3 bytes (9 as stored) fit a segment; 29 do not.
    assert!(file_name(&"长".repeat(28)).is_ok());
    assert!(file_name(&"长".repeat(29)).is_err());
    // Signs an object store encodes count three bytes each too.
    assert!(file_name(&"#".repeat(85)).is_ok());
    assert!(file_name(&"#".repeat(86)).is_err());
    // The whole name leaves room for the longest `{code}/{version}/{category}/`
    // in a key of at most 1024 bytes.
    let longest = ascii_name(FILE_NAME_MAX);
    assert_eq!(file_name(&longest), Ok(()));
    let refused = file_name(&ascii_name(FILE_NAME_MAX + 1)).unwrap_err().to_string();
    assert!(refused.contains("bytes as stored"), "{refused}");
    let key = storage_key(&"c".repeat(CODE_MAX), &"v".repeat(VERSION_MAX), "tabular", &longest);
    assert!(key.len() <= 1024, "{}", key.len());
}

/// A valid ASCII name of exactly `len` bytes: 100-byte folders, then the file.
fn ascii_name(len: usize) -> String {
    let folders = (len - 1) / 101;
    format!("{}{}", format!("{}/", "a".repeat(100)).repeat(folders), "a".repeat(len - folders * 101))
}

#[test]
fn stored_lengths_count_what_an_object_store_encodes_three_times() {
    assert_eq!(stored_len("plain-name_1.txt"), 16);
    assert_eq!(stored_len("数"), 9);
    assert_eq!(stored_len("é"), 6);
    assert_eq!(stored_len("a#b%c?d*e"), 17);
    assert_eq!(stored_len("\"<>[]^`{|}~"), 33);
    // The limit named in the refusal is the constant.
    assert_eq!(FILE_NAME_MAX, 886);
    assert!(file_name(&ascii_name(887)).unwrap_err().to_string().contains("longer than 886 bytes as stored"));
}
