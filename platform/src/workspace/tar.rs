//! Just enough tar for the Docker archive API, streaming: headers for the
//! entries Gantry uploads (a file and the directories missing above it),
//! and a reader that turns the engine's archive of one path back into
//! entries and their bytes without holding more than a header in memory.
//!
//! Formats: POSIX ustar, with a PAX extended header (`x`) for names over
//! 100 bytes or sizes over 8 GiB; the reader also understands GNU long
//! names (`L`) and base-256 numbers, which Docker's Go archive code emits.

use bytes::{Buf, Bytes, BytesMut};

pub const BLOCK: usize = 512;
/// Two zero blocks end an archive.
pub const END_OF_ARCHIVE: [u8; 2 * BLOCK] = [0; 2 * BLOCK];
/// Largest PAX/GNU long-name record accepted when reading.
const MAX_META: u64 = 64 * 1024;
/// Largest size an ustar octal field holds (11 octal digits).
const USTAR_MAX_SIZE: u64 = 0o77777777777;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other(u8),
}

/// The header block(s) for one entry: a PAX header first when the name or
/// the size does not fit ustar. `path` is relative to the extraction
/// directory; directories get a trailing `/`.
pub fn header(path: &str, kind: Kind, size: u64, mode: u32, mtime: u64) -> Vec<u8> {
    let mut name = path.trim_start_matches('/').to_string();
    if kind == Kind::Dir && !name.ends_with('/') {
        name.push('/');
    }
    let size = if kind == Kind::File { size } else { 0 };
    let mut out = Vec::with_capacity(3 * BLOCK);
    let mut records = String::new();
    if name.len() > 100 {
        records.push_str(&pax_record("path", &name));
    }
    if size > USTAR_MAX_SIZE {
        records.push_str(&pax_record("size", &size.to_string()));
    }
    if !records.is_empty() {
        let pax_name = format!("PaxHeaders/{}", truncate(&name, 80));
        out.extend_from_slice(&ustar(&pax_name, b'x', records.len() as u64, 0o644, mtime));
        out.extend_from_slice(records.as_bytes());
        out.resize(out.len() + padding(records.len() as u64), 0);
    }
    let typeflag = match kind {
        Kind::File => b'0',
        Kind::Dir => b'5',
        Kind::Symlink => b'2',
        Kind::Other(t) => t,
    };
    out.extend_from_slice(&ustar(truncate(&name, 100), typeflag, size.min(USTAR_MAX_SIZE), mode, mtime));
    out
}

/// Zero bytes after `size` bytes of data, up to the next block.
pub fn padding(size: u64) -> usize {
    ((BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64) as usize
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `"<len> key=value\n"`, where len counts the whole record.
fn pax_record(key: &str, value: &str) -> String {
    let body = format!(" {key}={value}\n");
    let mut len = body.len() + 1;
    while len.to_string().len() + body.len() != len {
        len = len.to_string().len() + body.len();
    }
    format!("{len}{body}")
}

fn ustar(name: &str, typeflag: u8, size: u64, mode: u32, mtime: u64) -> [u8; BLOCK] {
    let mut h = [0u8; BLOCK];
    h[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut h[100..108], u64::from(mode));
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], mtime);
    h[156] = typeflag;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
    let field = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(field.as_bytes());
    h
}

/// Zero-padded octal with a trailing NUL, filling the field.
fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    let text = &text.as_bytes()[text.len().saturating_sub(digits)..];
    field[..digits].copy_from_slice(text);
    field[digits] = 0;
}

/// One entry as read from an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub kind: Kind,
    pub size: u64,
    pub mode: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// An entry starts; its `size` bytes follow as `Data`.
    Entry(Entry),
    Data(Bytes),
    /// The current entry's data is complete.
    EntryEnd,
    /// The end-of-archive marker (or the stream's end between entries).
    End,
}

enum State {
    Header,
    /// PAX (`x`/`g`) or GNU long-name (`L`) data being collected.
    Meta {
        typeflag: u8,
        remaining: u64,
        pad: usize,
        data: Vec<u8>,
    },
    Data {
        remaining: u64,
        pad: usize,
    },
    Pad {
        remaining: usize,
    },
    Done,
}

/// A push parser: feed it the archive's chunks as they arrive; it returns
/// entries and data without copying file contents.
pub struct Reader {
    state: State,
    buf: BytesMut,
    next_path: Option<String>,
    next_size: Option<u64>,
}

impl Default for Reader {
    fn default() -> Self {
        Reader::new()
    }
}

impl Reader {
    pub fn new() -> Reader {
        Reader { state: State::Header, buf: BytesMut::new(), next_path: None, next_size: None }
    }

    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Consumes `chunk`; returns what it completed.
    pub fn push(&mut self, mut chunk: Bytes) -> Result<Vec<Item>, String> {
        let mut out = Vec::new();
        loop {
            match &mut self.state {
                State::Done => return Ok(out),
                State::Data { remaining, pad } => {
                    if *remaining == 0 {
                        out.push(Item::EntryEnd);
                        self.state = State::Pad { remaining: *pad };
                        continue;
                    }
                    if chunk.is_empty() {
                        return Ok(out);
                    }
                    let take = (*remaining).min(chunk.len() as u64) as usize;
                    out.push(Item::Data(chunk.split_to(take)));
                    *remaining -= take as u64;
                }
                State::Pad { remaining } => {
                    let take = (*remaining).min(chunk.len());
                    chunk.advance(take);
                    *remaining -= take;
                    if *remaining > 0 {
                        return Ok(out);
                    }
                    self.state = State::Header;
                }
                State::Meta { typeflag, remaining, pad, data } => {
                    let take = (*remaining).min(chunk.len() as u64) as usize;
                    data.extend_from_slice(&chunk.split_to(take));
                    *remaining -= take as u64;
                    if *remaining > 0 {
                        return Ok(out);
                    }
                    let (typeflag, pad, data) = (*typeflag, *pad, std::mem::take(data));
                    self.apply_meta(typeflag, &data)?;
                    self.state = State::Pad { remaining: pad };
                }
                State::Header => {
                    let need = BLOCK - self.buf.len();
                    let take = need.min(chunk.len());
                    self.buf.extend_from_slice(&chunk.split_to(take));
                    if self.buf.len() < BLOCK {
                        return Ok(out);
                    }
                    let block = self.buf.split().freeze();
                    if block.iter().all(|b| *b == 0) {
                        out.push(Item::End);
                        self.state = State::Done;
                        return Ok(out);
                    }
                    self.header_block(&block, &mut out)?;
                }
            }
        }
    }

    /// The archive's bytes ended: fine between entries, an error inside one.
    pub fn finish(&mut self) -> Result<Option<Item>, String> {
        match self.state {
            State::Done => Ok(None),
            State::Header if self.buf.is_empty() => {
                self.state = State::Done;
                Ok(Some(Item::End))
            }
            State::Pad { .. } => {
                self.state = State::Done;
                Ok(Some(Item::End))
            }
            _ => Err("the archive ended in the middle of an entry".into()),
        }
    }

    fn header_block(&mut self, h: &[u8], out: &mut Vec<Item>) -> Result<(), String> {
        verify_checksum(h)?;
        let typeflag = h[156];
        let size = number(&h[124..136])?;
        match typeflag {
            b'x' | b'g' | b'L' => {
                if size > MAX_META {
                    return Err(format!("tar metadata record of {size} bytes is too large"));
                }
                self.state = State::Meta {
                    typeflag,
                    remaining: size,
                    pad: padding(size),
                    data: Vec::with_capacity(size as usize),
                };
                return Ok(());
            }
            _ => {}
        }
        let mut path = cstr(&h[0..100]);
        if &h[257..262] == b"ustar" {
            let prefix = cstr(&h[345..500]);
            if !prefix.is_empty() {
                path = format!("{prefix}/{path}");
            }
        }
        if let Some(p) = self.next_path.take() {
            path = p;
        }
        let size = self.next_size.take().unwrap_or(size);
        let kind = match typeflag {
            b'0' | 0 | b'7' => Kind::File,
            b'5' => Kind::Dir,
            b'2' => Kind::Symlink,
            t => Kind::Other(t),
        };
        // Only regular files carry data (hard links, devices etc. do not).
        let data = if kind == Kind::File { size } else { 0 };
        let mode = number(&h[100..108]).unwrap_or(0) as u32;
        out.push(Item::Entry(Entry { path, kind, size: data, mode }));
        self.state = State::Data { remaining: data, pad: padding(data) };
        Ok(())
    }

    fn apply_meta(&mut self, typeflag: u8, data: &[u8]) -> Result<(), String> {
        match typeflag {
            b'L' => self.next_path = Some(cstr(data)),
            b'x' => {
                for (key, value) in pax_records(data)? {
                    match key.as_str() {
                        "path" => self.next_path = Some(value),
                        "size" => self.next_size = Some(value.parse().map_err(|_| format!("bad PAX size {value:?}"))?),
                        _ => {}
                    }
                }
            }
            // Global headers: nothing Gantry needs.
            _ => {}
        }
        Ok(())
    }
}

fn pax_records(mut data: &[u8]) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    while !data.is_empty() && data[0] != 0 {
        let space = data.iter().position(|b| *b == b' ').ok_or("bad PAX record")?;
        let len: usize =
            std::str::from_utf8(&data[..space]).ok().and_then(|s| s.parse().ok()).ok_or("bad PAX record length")?;
        if len > data.len() || len <= space + 1 {
            return Err("bad PAX record length".into());
        }
        let record = &data[space + 1..len - 1];
        let eq = record.iter().position(|b| *b == b'=').ok_or("bad PAX record")?;
        out.push((
            String::from_utf8_lossy(&record[..eq]).into_owned(),
            String::from_utf8_lossy(&record[eq + 1..]).into_owned(),
        ));
        data = &data[len..];
    }
    Ok(out)
}

fn cstr(field: &[u8]) -> String {
    let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// Octal ASCII (space/NUL padded), or GNU base-256 when the high bit is set.
fn number(field: &[u8]) -> Result<u64, String> {
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        let mut v: u64 = u64::from(field[0] & 0x7f);
        for b in &field[1..] {
            v = v.checked_mul(256).and_then(|v| v.checked_add(u64::from(*b))).ok_or("tar number too large")?;
        }
        return Ok(v);
    }
    let text = std::str::from_utf8(field).map_err(|_| "bad tar number")?;
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    if text.is_empty() {
        return Ok(0);
    }
    u64::from_str_radix(text, 8).map_err(|_| format!("bad tar number {text:?}"))
}

fn verify_checksum(h: &[u8]) -> Result<(), String> {
    let stored = number(&h[148..156])?;
    let unsigned: u64 =
        h.iter().enumerate().map(|(i, b)| if (148..156).contains(&i) { 32 } else { u64::from(*b) }).sum();
    let signed: i64 =
        h.iter().enumerate().map(|(i, b)| if (148..156).contains(&i) { 32 } else { i64::from(*b as i8) }).sum();
    if stored == unsigned || stored as i64 == signed {
        Ok(())
    } else {
        Err("corrupt tar header (checksum mismatch)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(entries: &[(&str, Kind, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (path, kind, data) in entries {
            out.extend(header(path, *kind, data.len() as u64, 0o644, 1_700_000_000));
            out.extend_from_slice(data);
            out.resize(out.len() + padding(data.len() as u64), 0);
        }
        out.extend_from_slice(&END_OF_ARCHIVE);
        out
    }

    fn read_all(bytes: &[u8], chunk: usize) -> Vec<Item> {
        let mut r = Reader::new();
        let mut items = Vec::new();
        for c in bytes.chunks(chunk) {
            items.extend(r.push(Bytes::copy_from_slice(c)).unwrap());
        }
        items.extend(r.finish().unwrap());
        // Merge data pieces so different chunkings compare equal.
        let mut merged: Vec<Item> = Vec::new();
        for item in items {
            match (merged.last_mut(), item) {
                (Some(Item::Data(prev)), Item::Data(d)) => {
                    let mut v = prev.to_vec();
                    v.extend_from_slice(&d);
                    *prev = Bytes::from(v);
                }
                (_, item) => merged.push(item),
            }
        }
        merged
    }

    #[test]
    fn round_trip_in_any_chunking() {
        let long = format!("{}/file.bin", "d".repeat(150));
        let data: Vec<u8> = (0..2000u32).map(|i| (i % 251) as u8).collect();
        let bytes =
            archive(&[("dir", Kind::Dir, b""), ("dir/a.txt", Kind::File, b"hello\n"), (&long, Kind::File, &data)]);
        for chunk in [1, 7, 512, 513, 4096, bytes.len()] {
            let items = read_all(&bytes, chunk);
            assert_eq!(
                items,
                vec![
                    Item::Entry(Entry { path: "dir/".into(), kind: Kind::Dir, size: 0, mode: 0o644 }),
                    Item::EntryEnd,
                    Item::Entry(Entry { path: "dir/a.txt".into(), kind: Kind::File, size: 6, mode: 0o644 }),
                    Item::Data(Bytes::from_static(b"hello\n")),
                    Item::EntryEnd,
                    Item::Entry(Entry { path: long.clone(), kind: Kind::File, size: 2000, mode: 0o644 }),
                    Item::Data(Bytes::from(data.clone())),
                    Item::EntryEnd,
                    Item::End,
                ],
                "chunk size {chunk}"
            );
        }
    }

    #[test]
    fn pax_record_lengths_count_themselves() {
        for n in [1, 5, 90, 95, 96, 97, 990, 995, 1000] {
            let r = pax_record("path", &"x".repeat(n));
            let (len, _) = r.split_once(' ').unwrap();
            assert_eq!(len.parse::<usize>().unwrap(), r.len(), "{r}");
        }
    }

    #[test]
    fn huge_sizes_use_pax() {
        let h = header("big", Kind::File, 20 * 1024 * 1024 * 1024, 0o644, 0);
        assert_eq!(h.len(), 3 * BLOCK, "PAX header, its data, ustar header");
        let mut r = Reader::new();
        let items = r.push(Bytes::from(h)).unwrap();
        assert_eq!(
            items,
            vec![Item::Entry(Entry {
                path: "big".into(),
                kind: Kind::File,
                size: 20 * 1024 * 1024 * 1024,
                mode: 0o644
            })]
        );
    }

    #[test]
    fn corrupt_and_truncated_archives_are_errors() {
        let mut bytes = archive(&[("a", Kind::File, b"abc")]);
        bytes[0] = b'b';
        assert!(Reader::new().push(Bytes::from(bytes)).is_err());
        let bytes = archive(&[("a", Kind::File, b"abc")]);
        let mut r = Reader::new();
        r.push(Bytes::copy_from_slice(&bytes[..BLOCK + 1])).unwrap();
        assert!(r.finish().is_err());
    }

    #[test]
    fn base256_numbers() {
        let mut f = [0u8; 12];
        f[0] = 0x80;
        f[11] = 5;
        f[10] = 1;
        assert_eq!(number(&f).unwrap(), 261);
    }
}
