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
    for disguised in ["report\u{202E}fdp.exe", "a\u{200B}b.txt", "\u{2066}x\u{2069}.bin", "\u{FEFF}a.txt", "soft\u{AD}hyphen.txt"] {
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
    assert_eq!(refusal.to_string(), "group ml holds 1.0 KiB of its 2.0 KiB dataset quota; this file needs 2.0 KiB more");
    let refusal = check_quota("ml", 100, 40, 30, 31).unwrap_err();
    assert!(refusal.to_string().contains("(and 30 B reserved by uploads in progress)"), "{refusal}");
    assert!(check_quota("ml", u64::MAX, u64::MAX, u64::MAX, 1).is_err());
}

#[test]
fn ranges() {
    assert_eq!(byte_range(None, 10), ByteRange::Whole);
    assert_eq!(byte_range(Some("bytes=2-5"), 10), ByteRange::Part { start: 2, end: 5 });
    assert_eq!(byte_range(Some("bytes=2-"), 10), ByteRange::Part { start: 2, end: 9 });
    assert_eq!(byte_range(Some("bytes=-3"), 10), ByteRange::Part { start: 7, end: 9 });
    assert_eq!(byte_range(Some("bytes=5-100"), 10), ByteRange::Part { start: 5, end: 9 });
    assert_eq!(byte_range(Some("bytes=10-"), 10), ByteRange::Unsatisfiable);
    assert_eq!(byte_range(Some("bytes=0-1,4-5"), 10), ByteRange::Whole);
    assert_eq!(byte_range(Some("bytes=5-2"), 10), ByteRange::Whole);
    assert_eq!(byte_range(Some("items=1-2"), 10), ByteRange::Whole);
    assert_eq!(byte_range(Some("bytes=-0"), 10), ByteRange::Unsatisfiable);
}

#[test]
fn categories_and_visibility() {
    assert!(category("images").is_ok());
    assert!(category("pictures").is_err());
    assert_eq!(Visibility::parse("public"), Ok(Visibility::Public));
    assert!(Visibility::parse("world").is_err());
}
