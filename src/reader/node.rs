//! The values the reader reads into, borrowed from the input: a string as written
//! ([`Text`]), a string of a node ([`Str`]), a JSON value ([`Node`]) and a value read as a
//! scalar ([`Scalar`]). A string keeps its escapes until it is read: equal strings compare
//! equal however they are escaped, and unescaping goes piece by piece ([`Unescaped`]).

use std::borrow::Cow;

use crate::reader::bytes::{bytes_equal_to, find_backslash, hex4, same_bytes};

/// A JSON string of the input, as written between its quotes (escapes included). Equal texts
/// compare equal however they are escaped.
///
/// Its bytes are UTF-8 (the reader checked the strings that are not ASCII); they are kept as
/// bytes so that a 2 MiB file content is never validated twice.
#[derive(Clone, Copy, Debug)]
pub struct Text<'a> {
    pub(super) raw: &'a [u8],
    /// It holds an escape.
    pub(super) escaped: bool,
    /// Its length in bytes, unescaped.
    pub(super) len: usize,
}

impl<'a> Text<'a> {
    /// The text as written between the quotes.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    pub fn is_escaped(&self) -> bool {
        self.escaped
    }

    /// Its length in bytes, unescaped.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// The unescaped string: borrowed from the input unless it holds escapes.
    pub fn to_str(self) -> Cow<'a, str> {
        if !self.is_escaped() {
            return Cow::Borrowed(std::str::from_utf8(self.raw).unwrap_or_default());
        }
        let mut out = Vec::with_capacity(self.raw.len());
        self.for_each_piece(|piece| out.extend_from_slice(piece));
        // The reader checked the escapes: the bytes are UTF-8.
        Cow::Owned(String::from_utf8(out).unwrap_or_default())
    }

    /// The unescaped bytes, in pieces: runs of the input between escapes, and each escape
    /// decoded (a hash or a comparison needs no copy of a 2 MiB file content).
    pub fn for_each_piece(&self, put: impl FnMut(&[u8])) {
        struct Pieces<F>(F);
        impl<F: FnMut(&[u8])> Unescaped for Pieces<F> {
            fn run(&mut self, bytes: &[u8]) {
                (self.0)(bytes)
            }
        }
        self.unescape_into(&mut Pieces(put));
    }

    /// The unescaped bytes into `out`: runs of the input, and the byte each simple escape
    /// (`\n`, `\"`, ...) stands for on its own (a file content has one every few dozen bytes).
    pub fn unescape_into(&self, out: &mut impl Unescaped) {
        let bytes = self.raw;
        if !self.is_escaped() {
            out.run(bytes);
            return;
        }
        let mut start = 0;
        while let Some(at) = find_backslash(bytes, start) {
            if start < at {
                out.run(&bytes[start..at]);
            }
            let simple = one_letter_escape(bytes.get(at + 1));
            if simple != 0 {
                out.byte(simple);
                start = at + 2;
            } else {
                let mut buf = [0u8; 4];
                let (decoded, used) = decode_escape(&bytes[at..], &mut buf);
                out.run(decoded);
                start = at + used;
            }
        }
        if start < bytes.len() {
            out.run(&bytes[start..]);
        }
    }

    /// Each unescaped byte in turn, for a consumer that takes one byte at a time (FNV-1a).
    /// [`Text::unescape_into`] cuts a run at every escape, and a file content has one every
    /// few dozen bytes: here eight bytes are read at once and, up to the next backslash,
    /// handed over from that word, so the text is read once and nothing is cut.
    pub fn for_each_byte(&self, mut put: impl FnMut(u8)) {
        let bytes = self.raw;
        let mut i = 0;
        while i < bytes.len() {
            if let Some(chunk) = bytes.get(i..i + 8) {
                let mut word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
                let hits = bytes_equal_to(word, b'\\');
                if hits == 0 {
                    for _ in 0..8 {
                        put(word as u8);
                        word >>= 8;
                    }
                    i += 8;
                    continue;
                }
                let before = (hits.trailing_zeros() / 8) as usize;
                for _ in 0..before {
                    put(word as u8);
                    word >>= 8;
                }
                i += before;
            } else if bytes[i] != b'\\' {
                put(bytes[i]);
                i += 1;
                continue;
            }
            // bytes[i] is a backslash.
            let simple = one_letter_escape(bytes.get(i + 1));
            if simple != 0 {
                put(simple);
                i += 2;
            } else {
                let mut buf = [0u8; 4];
                let (decoded, used) = decode_escape(&bytes[i..], &mut buf);
                decoded.iter().for_each(|&b| put(b));
                i += used;
            }
        }
    }

    /// Whether it reads `s` once unescaped.
    pub fn is(&self, s: &str) -> bool {
        if !self.escaped {
            return self.raw == s.as_bytes();
        }
        self.to_str() == s
    }
}

impl PartialEq for Text<'_> {
    fn eq(&self, other: &Self) -> bool {
        if same_bytes(self.raw, other.raw) {
            return true;
        }
        if !self.escaped && !other.escaped {
            return false;
        }
        self.to_str() == other.to_str()
    }
}

impl Eq for Text<'_> {}

impl PartialOrd for Text<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text<'_> {
    /// The order of the unescaped strings (a `Value`'s map order).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if !self.is_escaped() && !other.is_escaped() {
            return self.raw.cmp(other.raw);
        }
        self.to_str().cmp(&other.to_str())
    }
}

/// Where [`Text::unescape_into`] writes.
pub trait Unescaped {
    fn run(&mut self, bytes: &[u8]);

    fn byte(&mut self, byte: u8) {
        self.run(&[byte]);
    }
}

/// The byte a one-letter escape stands for, given the byte after the backslash (`n`: a
/// newline); 0 for `\u` (and for an escape cut short, which the reader never lets through).
fn one_letter_escape(letter: Option<&u8>) -> u8 {
    match letter {
        Some(b'n') => b'\n',
        Some(b't') => b'\t',
        Some(b'r') => b'\r',
        Some(b'b') => 0x08,
        Some(b'f') => 0x0c,
        Some(&b) if b != b'u' => b,
        _ => 0,
    }
}

/// A string of a [`Node`]: as written in the input, or one made by the rules (RKE2's
/// normalised user data) or borrowed from a `serde_json::Value`. Compared by what it says.
#[derive(Clone, Debug)]
pub enum Str<'a> {
    Json(Text<'a>),
    Plain(Cow<'a, str>),
}

impl<'a> Str<'a> {
    /// The unescaped string (borrowed unless it holds escapes or was made).
    pub fn to_str(&self) -> Cow<'_, str> {
        match self {
            Str::Json(text) => text.to_str(),
            Str::Plain(text) => Cow::Borrowed(text),
        }
    }

    /// Its unescaped bytes into `out` (see [`Text::unescape_into`]).
    pub fn unescape_into(&self, out: &mut impl Unescaped) {
        match self {
            Str::Json(text) => text.unescape_into(out),
            Str::Plain(text) => out.run(text.as_bytes()),
        }
    }

    /// Its unescaped bytes one at a time (see [`Text::for_each_byte`]).
    pub fn for_each_byte(&self, mut put: impl FnMut(u8)) {
        match self {
            Str::Json(text) => text.for_each_byte(put),
            Str::Plain(text) => text.bytes().for_each(&mut put),
        }
    }

    /// Its length in bytes, unescaped.
    pub fn len(&self) -> usize {
        match self {
            Str::Json(text) => text.len(),
            Str::Plain(text) => text.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Str::Json(text) => text.is_empty(),
            Str::Plain(text) => text.is_empty(),
        }
    }

    /// Whether it says `s`.
    pub fn is(&self, s: &str) -> bool {
        match self {
            Str::Json(text) => text.is(s),
            Str::Plain(text) => same_bytes(text.as_bytes(), s.as_bytes()),
        }
    }
}

impl PartialEq for Str<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Str::Json(a), Str::Json(b)) => a == b,
            (Str::Plain(a), Str::Plain(b)) => same_bytes(a.as_bytes(), b.as_bytes()),
            (Str::Json(a), Str::Plain(b)) | (Str::Plain(b), Str::Json(a)) => a.is(b),
        }
    }
}

impl Eq for Str<'_> {}

impl PartialOrd for Str<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Str<'_> {
    /// The order of the unescaped strings (a `Value`'s map order).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        match (self, other) {
            (Str::Json(a), Str::Json(b)) => a.cmp(b),
            _ => self.to_str().cmp(&other.to_str()),
        }
    }
}

/// A JSON value borrowed from its input: what the rules read of `spec` and `status`. A string
/// is kept as written (a 2 MiB file content is neither copied nor unescaped), an object's keys
/// are sorted and given once (the last value of a key given twice), as in a
/// `serde_json::Value`, whose equality it has.
#[derive(Clone, Debug, PartialEq)]
pub enum Node<'a> {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(Str<'a>),
    Array(Vec<Node<'a>>),
    Object(Vec<(Str<'a>, Node<'a>)>),
}

impl<'a> Node<'a> {
    /// The value of `key`, when this is an object that has it.
    pub fn get(&self, key: &str) -> Option<&Node<'a>> {
        let Node::Object(entries) = self else {
            return None;
        };
        // Keys are sorted by their unescaped bytes.
        entries
            .binary_search_by(|(k, _)| match k {
                Str::Json(text) if !text.is_escaped() => text.raw().cmp(key.as_bytes()),
                _ => k.to_str().as_bytes().cmp(key.as_bytes()),
            })
            .ok()
            .map(|i| &entries[i].1)
    }

    /// Follows a list of object keys.
    pub fn at(&self, keys: &[&str]) -> Option<&Node<'a>> {
        keys.iter().try_fold(self, |node, key| node.get(key))
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node<'a>> {
        let Node::Object(entries) = self else {
            return None;
        };
        entries
            .iter_mut()
            .find(|(k, _)| k.is(key))
            .map(|(_, value)| value)
    }

    pub fn as_str(&self) -> Option<&Str<'a>> {
        match self {
            Node::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Node::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Node::Null)
    }

    /// An object of `entries` as a `Value`'s map holds them: sorted, the last value of a key
    /// given twice. The sort is stable, so the last of equal keys is the one given last.
    pub fn object(mut entries: Vec<(Str<'a>, Node<'a>)>) -> Node<'a> {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut deduplicated: Vec<(Str<'a>, Node<'a>)> = Vec::with_capacity(entries.len());
        for entry in entries {
            match deduplicated.last_mut() {
                Some(last) if last.0 == entry.0 => *last = entry,
                _ => deduplicated.push(entry),
            }
        }
        Node::Object(deduplicated)
    }

    /// The node as compact JSON text, as a `serde_json::Value` displays it (for messages).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A `serde_json::Value` seen as a node, its strings borrowed.
    pub fn from_value(value: &'a serde_json::Value) -> Node<'a> {
        use serde_json::Value;
        match value {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Number(n) => Node::Number(n.clone()),
            Value::String(s) => Node::String(Str::Plain(Cow::Borrowed(s))),
            Value::Array(items) => Node::Array(items.iter().map(Node::from_value).collect()),
            Value::Object(map) => {
                let mut entries: Vec<(Str<'a>, Node<'a>)> = map
                    .iter()
                    .map(|(k, v)| (Str::Plain(Cow::Borrowed(k.as_str())), Node::from_value(v)))
                    .collect();
                // A map is sorted already, unless serde_json keeps insertion order.
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                Node::Object(entries)
            }
        }
    }
}

/// Written as the `serde_json::Value` it equals: strings unescaped, keys in their order.
impl serde::Serialize for Node<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self {
            Node::Null => serializer.serialize_unit(),
            Node::Bool(b) => serializer.serialize_bool(*b),
            Node::Number(n) => n.serialize(serializer),
            Node::String(s) => serializer.serialize_str(&s.to_str()),
            Node::Array(items) => {
                let mut list = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    list.serialize_element(item)?;
                }
                list.end()
            }
            Node::Object(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(&*key.to_str(), value)?;
                }
                map.end()
            }
        }
    }
}

/// Decodes the escape at the start of `bytes` (the reader checked it): the bytes it stands for
/// and how many input bytes it takes.
fn decode_escape<'b>(bytes: &[u8], buf: &'b mut [u8; 4]) -> (&'b [u8], usize) {
    let simple = |b: u8, buf: &'b mut [u8; 4]| -> (&'b [u8], usize) {
        buf[0] = b;
        (&buf[..1], 2)
    };
    match bytes.get(1) {
        Some(b'n') => simple(b'\n', buf),
        Some(b't') => simple(b'\t', buf),
        Some(b'r') => simple(b'\r', buf),
        Some(b'b') => simple(0x08, buf),
        Some(b'f') => simple(0x0c, buf),
        Some(b'u') if bytes.len() >= 6 => {
            let n = hex4(&bytes[2..]);
            let (code, used) = if (0xD800..0xDC00).contains(&n) && bytes.len() >= 12 {
                let n2 = hex4(&bytes[8..]);
                (
                    0x10000 + ((n - 0xD800) << 10) + (n2.wrapping_sub(0xDC00) & 0x3ff),
                    12,
                )
            } else {
                (n, 6)
            };
            let c = char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
            let len = c.encode_utf8(buf).len();
            (&buf[..len], used)
        }
        Some(&b) => simple(b, buf),
        None => (&buf[..0], 1),
    }
}

/// A JSON value read as a scalar: strings and booleans kept; numbers, lists and objects only
/// told apart from null.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scalar<'a> {
    #[default]
    Null,
    Bool(bool),
    Str(Text<'a>),
    Other,
}

impl<'a> Scalar<'a> {
    pub fn text(&self) -> Option<Text<'a>> {
        match self {
            Scalar::Str(t) => Some(*t),
            _ => None,
        }
    }

    /// The string, unescaped, if it is one.
    pub fn str(&self) -> Option<Cow<'a, str>> {
        self.text().map(|t| t.to_str())
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Scalar::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Scalar::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::json::read_document;
    use rstest::rstest;

    #[rstest]
    #[case::plain(r#""abc""#, "abc")]
    #[case::escapes(r#""a\n\"b\" \u00e9 \uD83D\uDE00 \/""#, "a\n\"b\" é 😀 /")]
    #[case::long(r#""0123456789abcdef0123456789\tx""#, "0123456789abcdef0123456789\tx")]
    #[case::escape_ends_a_word(r#""0123456\n89abcdef\"""#, "0123456\n89abcdef\"")]
    #[case::escape_starts_a_word(r#""01234567\\89abcdef""#, "01234567\\89abcdef")]
    #[case::escapes_in_a_row(r#""\n\n\n\n\n\n\n\n\n""#, "\n\n\n\n\n\n\n\n\n")]
    #[case::unicode_in_the_tail(r#""0123456789\u00e9\uD83D\uDE00""#, "0123456789é😀")]
    #[case::file_lines(
        r#""a = \"value-0123456789abcdef\"\nb = \"value\"\n""#,
        "a = \"value-0123456789abcdef\"\nb = \"value\"\n"
    )]
    fn texts_unescape(#[case] input: &str, #[case] expected: &str) {
        let text = read_document(input.as_bytes(), |r| r.read_text()).unwrap();
        assert_eq!(text.to_str(), expected);
        assert_eq!(text.len(), expected.len());
        assert!(text.is(expected));
        let mut pieces = Vec::new();
        text.for_each_piece(|p| pieces.extend_from_slice(p));
        assert_eq!(pieces, expected.as_bytes());
        let mut bytes = Vec::new();
        text.for_each_byte(|b| bytes.push(b));
        assert_eq!(bytes, expected.as_bytes());
    }

    #[test]
    fn nodes_read_as_values_do() {
        let text =
            br#"{"b": [1, 1.0, -0, "x\u00e9", true, null], "a": {"k": 1, "k": 2}, "\u0061a": "y"}"#;
        let node = read_document(text, |r| r.read_node()).unwrap();
        let value: serde_json::Value = serde_json::from_slice(text).unwrap();
        assert_eq!(node, Node::from_value(&value));
        // Written back as the value displays: unescaped, sorted, the last of a repeated key.
        assert_eq!(node.to_json(), value.to_string());
        assert_eq!(node.at(&["a", "k"]), Some(&Node::Number(2.into())));
        assert!(node.get("aa").and_then(Node::as_str).unwrap().is("y"));
        assert_eq!(node.get("c"), None);
        let Some(Node::Object(entries)) = Some(&node) else {
            panic!()
        };
        let keys: Vec<String> = entries
            .iter()
            .map(|(k, _)| k.to_str().into_owned())
            .collect();
        assert_eq!(keys, ["a", "aa", "b"]);
    }

    #[test]
    fn texts_compare_unescaped() {
        let a = read_document(br#""A/""#, |r| r.read_text()).unwrap();
        let b = read_document(br#""\u0041\/""#, |r| r.read_text()).unwrap();
        let c = read_document(br#""B""#, |r| r.read_text()).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(b < c);
        assert!(b.is("A/"));
    }
}
