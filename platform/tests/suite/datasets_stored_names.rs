//! The name rules count a file name's length as the S3 store writes it
//! into a key (`gantry_core::datasets::stored_len`): here that count is
//! held against `object_store`'s own encoding, so a name the rules let in
//! always fits a key, and one that would not is refused before its body.

use gantry_core::datasets::{file_name, storage_key, stored_len, FILE_NAME_MAX, SEGMENT_MAX};
use object_store::path::Path;

#[test]
fn the_length_rules_count_what_object_store_writes() {
    let names = [
        "plain.txt",
        "数据/说明.bin",
        "naïve café.csv",
        "a#b%c?d*e",
        "\"<>[]^`{|}~",
        "sp ace/tab$&'()+,;=@!.x",
        "❤\u{FE0F}.png",
    ];
    for name in names {
        let stored = Path::from(name);
        let segments: Vec<_> = stored.parts().collect();
        assert_eq!(segments.len(), name.split('/').count(), "{name}");
        for (part, raw) in segments.iter().zip(name.split('/')) {
            assert_eq!(part.as_ref().len(), stored_len(raw), "{raw:?} is written {:?}", part.as_ref());
        }
        let whole = name.split('/').map(stored_len).sum::<usize>() + name.matches('/').count();
        assert_eq!(stored.as_ref().len(), whole, "{name}");
    }
    // The longest names the rules let in fit a segment and a whole key.
    let segment = "长".repeat(SEGMENT_MAX / 9);
    assert_eq!(file_name(&segment), Ok(()));
    assert!(Path::from(segment.as_str()).as_ref().len() <= SEGMENT_MAX);
    let folders = (FILE_NAME_MAX - 1) / 101;
    let longest =
        format!("{}{}", format!("{}/", "a".repeat(100)).repeat(folders), "a".repeat(FILE_NAME_MAX - folders * 101));
    assert_eq!(file_name(&longest), Ok(()));
    let key = storage_key(&"c".repeat(64), &"v".repeat(64), "tabular", &longest);
    assert!(Path::from(key.as_str()).as_ref().len() <= 1024);
}
