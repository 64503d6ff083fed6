//! Reading JSON as far as the rules read it, straight from the bytes the host sends:
//! a pull reader whose views borrow their strings from the input and skip what no rule reads,
//! instead of a `serde_json::Value` of everything (a pool list of 1,000 items, the
//! `managedFields` of both objects of a request).
//!
//! The reader accepts exactly what `serde_json::from_slice::<Value>` accepts, skipped values
//! included: the JSON grammar, UTF-8 strings without control characters, escapes with paired
//! surrogates, numbers within f64's range, at most 127 nested lists and objects. On a refusal
//! the caller asks serde_json for its message ([`serde_message`]), so a bad input gets the same
//! answer as when the whole payload is parsed into a `Value`. Views are lenient, as the rules
//! are: a value of an unexpected type reads as absent, never as an error, and a key given twice
//! counts with its last value (as in a `Value`).

use std::borrow::Cow;

/// serde_json's recursion limit: the 128th nested list or object is refused.
const MAX_DEPTH: usize = 128;

/// Why the reader refused its input (serde_json's message is the one reported).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalid(pub &'static str);

pub type Read<T> = Result<T, Invalid>;

/// serde_json's message for an input the reader refused: the one parsing the whole payload
/// into a `Value` gives.
pub fn serde_message(input: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(input) {
        Err(e) => e.to_string(),
        // Never expected: the reader and serde_json disagree. Say so rather than guess.
        Ok(_) => "the input is JSON, but not JSON this policy can read".to_string(),
    }
}

/// A JSON string of the input, as written between its quotes (escapes included). Equal texts
/// compare equal however they are escaped.
///
/// Its bytes are UTF-8 (the reader checked the strings that are not ASCII); they are kept as
/// bytes so that a 2 MiB file content is never validated twice.
#[derive(Clone, Copy, Debug)]
pub struct Text<'a> {
    raw: &'a [u8],
    /// It holds an escape.
    escaped: bool,
    /// Its length in bytes, unescaped.
    len: usize,
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

/// The first `\\` of `bytes` from `from` on, eight bytes at a time.
fn find_backslash(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 8 <= bytes.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[i..i + 8]);
        let hits = bytes_equal_to(u64::from_le_bytes(word), b'\\');
        if hits != 0 {
            return Some(i + (hits.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    bytes[i.min(bytes.len())..]
        .iter()
        .position(|&b| b == b'\\')
        .map(|p| i + p)
}

/// `a == b`, eight bytes at a time. A config's bulk is file contents, and the guest's `memcmp`
/// (wasi-libc's) compares one byte per iteration: comparing the unchanged files that way would be a
/// tenth of a token rotation's instructions.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (a_words, a_rest) = a.split_at(a.len() - a.len() % 8);
    let (b_words, b_rest) = b.split_at(a_words.len());
    let word = |chunk: &[u8]| u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
    a_words
        .chunks_exact(8)
        .zip(b_words.chunks_exact(8))
        .all(|(x, y)| word(x) == word(y))
        && a_rest.iter().zip(b_rest).all(|(x, y)| x == y)
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

fn hex(b: u8) -> u32 {
    match b {
        b'0'..=b'9' => u32::from(b - b'0'),
        b'a'..=b'f' => u32::from(b - b'a' + 10),
        b'A'..=b'F' => u32::from(b - b'A' + 10),
        _ => 0,
    }
}

fn hex4(bytes: &[u8]) -> u32 {
    bytes.iter().take(4).fold(0, |n, &b| (n << 4) | hex(b))
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

/// What the next value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Object,
    Array,
    String,
    Number,
    Bool,
    Null,
}

/// A pull reader over one JSON document. Each `read_*`/`skip` call takes exactly one value;
/// [`Reader::finish`] checks that nothing but whitespace follows the document.
pub struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
    depth: usize,
}

/// The letters of the one-letter escapes: `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`.
const SIMPLE_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let letters = *b"\"\\/bfnrt";
    let mut i = 0;
    while i < letters.len() {
        table[letters[i] as usize] = true;
        i += 1;
    }
    table
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The bytes of `word` a string scan must stop at: `"`, `\`, control characters, non-ASCII.
fn special(word: u64) -> u64 {
    bytes_equal_to(word, b'"')
        | bytes_equal_to(word, b'\\')
        | ((word.wrapping_sub(ONES * 0x20) | word) & HIGHS)
}

/// The high bit of each byte of `word` that is `byte`. The lowest one set is exact; a borrow
/// can also mark a byte above a match, so only the first match is to be trusted.
fn bytes_equal_to(word: u64, byte: u8) -> u64 {
    let x = word ^ (ONES * u64::from(byte));
    x.wrapping_sub(ONES) & !x & HIGHS
}

impl<'a> Reader<'a> {
    pub fn new(input: &'a [u8]) -> Self {
        Reader {
            input,
            pos: 0,
            depth: 0,
        }
    }

    fn fail<T>(&self, why: &'static str) -> Read<T> {
        Err(Invalid(why))
    }

    fn skip_whitespace(&mut self) {
        while let Some(&b) = self.input.get(self.pos) {
            if matches!(b, b' ' | b'\n' | b'\t' | b'\r') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    /// The kind of the next value.
    pub fn peek(&mut self) -> Read<Next> {
        self.skip_whitespace();
        Ok(match self.input.get(self.pos) {
            Some(b'{') => Next::Object,
            Some(b'[') => Next::Array,
            Some(b'"') => Next::String,
            Some(b'-' | b'0'..=b'9') => Next::Number,
            Some(b't' | b'f') => Next::Bool,
            Some(b'n') => Next::Null,
            _ => return self.fail("expected a value"),
        })
    }

    /// Nothing but whitespace after the document.
    pub fn finish(&mut self) -> Read<()> {
        self.skip_whitespace();
        if self.pos == self.input.len() {
            Ok(())
        } else {
            self.fail("trailing characters")
        }
    }

    fn eat(&mut self, byte: u8) -> Read<()> {
        self.skip_whitespace();
        if self.input.get(self.pos) == Some(&byte) {
            self.pos += 1;
            Ok(())
        } else {
            self.fail("unexpected character")
        }
    }

    fn literal(&mut self, word: &[u8]) -> Read<()> {
        if self.input[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            self.fail("expected a literal")
        }
    }

    fn enter(&mut self) -> Read<()> {
        self.depth += 1;
        if self.depth >= MAX_DEPTH {
            return self.fail("recursion limit exceeded");
        }
        Ok(())
    }

    /// Reads an object, calling `field` with each key; `field` must read its value. A value
    /// that is not an object is refused: see [`Reader::read_object_or_skip`].
    pub fn read_object(
        &mut self,
        mut field: impl FnMut(&mut Self, Text<'a>) -> Read<()>,
    ) -> Read<()> {
        self.eat(b'{')?;
        self.enter()?;
        self.skip_whitespace();
        if self.input.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.skip_whitespace();
            if self.input.get(self.pos) != Some(&b'"') {
                return self.fail("expected a key");
            }
            let key = self.read_text()?;
            self.eat(b':')?;
            field(self, key)?;
            self.skip_whitespace();
            match self.input.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return self.fail("expected , or }"),
            }
        }
    }

    /// An object read key by key (`true`), or any other value skipped (`false`).
    pub fn read_object_or_skip(
        &mut self,
        field: impl FnMut(&mut Self, Text<'a>) -> Read<()>,
    ) -> Read<bool> {
        if self.peek()? == Next::Object {
            self.read_object(field)?;
            Ok(true)
        } else {
            self.skip()?;
            Ok(false)
        }
    }

    /// Reads a list, calling `item` for each element; `item` must read it.
    pub fn read_array(&mut self, mut item: impl FnMut(&mut Self) -> Read<()>) -> Read<()> {
        self.eat(b'[')?;
        self.enter()?;
        self.skip_whitespace();
        if self.input.get(self.pos) == Some(&b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            item(self)?;
            self.skip_whitespace();
            match self.input.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                _ => return self.fail("expected , or ]"),
            }
        }
    }

    /// Reads a string.
    pub fn read_text(&mut self) -> Read<Text<'a>> {
        self.eat(b'"')?;
        let start = self.pos;
        let input = self.input;
        let mut escaped = false;
        let mut saved = 0; // the bytes escapes take beyond what they stand for
        let mut ascii = true;
        let mut i = start;
        loop {
            // Eight bytes at a time up to the first byte that needs a look.
            while i + 8 <= input.len() {
                let mut word = [0u8; 8];
                word.copy_from_slice(&input[i..i + 8]);
                let hits = special(u64::from_le_bytes(word));
                if hits != 0 {
                    i += (hits.trailing_zeros() / 8) as usize;
                    break;
                }
                i += 8;
            }
            let Some(&b) = input.get(i) else {
                return self.fail("unterminated string");
            };
            match b {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    // File contents hold an escape every few dozen bytes: the common ones here,
                    // told by a table (a jump table cost more than the rest of the escape).
                    let (used, decoded) = match input.get(i + 1) {
                        Some(&next) if SIMPLE_ESCAPE[usize::from(next)] => (2, 1),
                        _ => self.check_escape(i)?,
                    };
                    i += used;
                    saved += used - decoded;
                }
                0..=0x1f => return self.fail("control character in a string"),
                0x80.. => {
                    ascii = false;
                    i += 1;
                }
                _ => i += 1,
            }
        }
        let raw = &input[start..i];
        // ASCII is UTF-8; the rest is checked once, here.
        if !ascii && std::str::from_utf8(raw).is_err() {
            return self.fail("invalid UTF-8 in a string");
        }
        self.pos = i + 1;
        Ok(Text {
            raw,
            escaped,
            len: raw.len() - saved,
        })
    }

    /// Checks the escape at `at` as serde_json does for strings: a known letter, four hex
    /// digits after `u`, surrogates in pairs. Returns its length in bytes and the length of
    /// the UTF-8 it stands for.
    fn check_escape(&self, at: usize) -> Read<(usize, usize)> {
        let input = self.input;
        let hex4_at = |i: usize| -> Read<u32> {
            match input.get(i..i + 4) {
                Some(h) if h.iter().all(u8::is_ascii_hexdigit) => Ok(hex4(h)),
                _ => Err(Invalid("invalid \\u escape")),
            }
        };
        match input.get(at + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok((2, 1)),
            Some(b'u') => {
                let n = hex4_at(at + 2)?;
                if (0xDC00..0xE000).contains(&n) {
                    return self.fail("lone trailing surrogate");
                }
                if !(0xD800..0xDC00).contains(&n) {
                    let utf8 = match n {
                        0..0x80 => 1,
                        0x80..0x800 => 2,
                        _ => 3,
                    };
                    return Ok((6, utf8));
                }
                if input.get(at + 6..at + 8) != Some(b"\\u") {
                    return self.fail("lone leading surrogate");
                }
                let n2 = hex4_at(at + 8)?;
                if !(0xDC00..0xE000).contains(&n2) {
                    return self.fail("lone leading surrogate");
                }
                Ok((12, 4))
            }
            _ => self.fail("invalid escape"),
        }
    }

    /// Reads a number; returns its text.
    pub fn read_number(&mut self) -> Read<&'a str> {
        self.skip_whitespace();
        let input = self.input;
        let start = self.pos;
        let mut i = start;
        let digits = |i: &mut usize| {
            let from = *i;
            while input.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i - from
        };
        if input.get(i) == Some(&b'-') {
            i += 1;
        }
        match input.get(i) {
            Some(b'0') => {
                i += 1;
                if input.get(i).is_some_and(u8::is_ascii_digit) {
                    return self.fail("invalid number");
                }
            }
            Some(b'1'..=b'9') => {
                digits(&mut i);
            }
            _ => return self.fail("invalid number"),
        }
        if input.get(i) == Some(&b'.') {
            i += 1;
            if digits(&mut i) == 0 {
                return self.fail("invalid number");
            }
        }
        let mut exponent = false;
        if matches!(input.get(i), Some(b'e' | b'E')) {
            exponent = true;
            i += 1;
            if matches!(input.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                return self.fail("invalid number");
            }
        }
        let text = std::str::from_utf8(&input[start..i]).map_err(|_| Invalid("invalid number"))?;
        // Only an exponent or some 300 digits reach past f64's range: let serde_json judge.
        if (exponent || text.len() > 300) && text.parse::<serde_json::Number>().is_err() {
            return self.fail("number out of range");
        }
        self.pos = i;
        Ok(text)
    }

    pub fn read_bool(&mut self) -> Read<bool> {
        self.skip_whitespace();
        match self.input.get(self.pos) {
            Some(b't') => self.literal(b"true").map(|_| true),
            Some(b'f') => self.literal(b"false").map(|_| false),
            _ => self.fail("expected a boolean"),
        }
    }

    pub fn read_null(&mut self) -> Read<()> {
        self.skip_whitespace();
        self.literal(b"null")
    }

    /// Reads any value as a scalar.
    pub fn read_scalar(&mut self) -> Read<Scalar<'a>> {
        Ok(match self.peek()? {
            Next::String => Scalar::Str(self.read_text()?),
            Next::Bool => Scalar::Bool(self.read_bool()?),
            Next::Null => {
                self.read_null()?;
                Scalar::Null
            }
            Next::Number | Next::Object | Next::Array => {
                self.skip()?;
                Scalar::Other
            }
        })
    }

    /// Reads any value and drops it (checked all the same).
    pub fn skip(&mut self) -> Read<()> {
        match self.peek()? {
            Next::Object => self.read_object(|r, _| r.skip()),
            Next::Array => self.read_array(|r| r.skip()),
            Next::String => self.read_text().map(|_| ()),
            Next::Number => self.read_number().map(|_| ()),
            Next::Bool => self.read_bool().map(|_| ()),
            Next::Null => self.read_null(),
        }
    }

    /// Reads any value as a [`Node`].
    pub fn read_node(&mut self) -> Read<Node<'a>> {
        Ok(match self.peek()? {
            Next::Object => {
                let mut entries: Vec<(Str<'a>, Node<'a>)> = Vec::new();
                self.read_object(|r, key| {
                    let value = r.read_node()?;
                    entries.push((Str::Json(key), value));
                    Ok(())
                })?;
                Node::object(entries)
            }
            Next::Array => {
                let mut items = Vec::new();
                self.read_array(|r| {
                    items.push(r.read_node()?);
                    Ok(())
                })?;
                Node::Array(items)
            }
            Next::String => Node::String(Str::Json(self.read_text()?)),
            Next::Number => {
                let text = self.read_number()?;
                Node::Number(text.parse().map_err(|_| Invalid("number out of range"))?)
            }
            Next::Bool => Node::Bool(self.read_bool()?),
            Next::Null => {
                self.read_null()?;
                Node::Null
            }
        })
    }

    /// Reads a list of `T` (`None`: not a list, skipped).
    pub fn read_list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Read<T>,
    ) -> Read<Option<Vec<T>>> {
        if self.peek()? != Next::Array {
            self.skip()?;
            return Ok(None);
        }
        let mut items = Vec::new();
        self.read_array(|r| {
            items.push(item(r)?);
            Ok(())
        })?;
        Ok(Some(items))
    }
}

/// Reads a whole document with `read`, refusing trailing characters.
pub fn read_document<'a, T>(
    input: &'a [u8],
    read: impl FnOnce(&mut Reader<'a>) -> Read<T>,
) -> Read<T> {
    let mut reader = Reader::new(input);
    let value = read(&mut reader)?;
    reader.finish()?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rstest::rstest;

    fn accepts(input: &[u8]) -> bool {
        read_document(input, |r| r.skip()).is_ok()
    }

    fn serde_accepts(input: &[u8]) -> bool {
        serde_json::from_slice::<serde_json::Value>(input).is_ok()
    }

    #[rstest]
    #[case::empty("")]
    #[case::spaces("  ")]
    #[case::object(r#"{"a": [1, -2.5e3, true, false, null, "x"], "b": {}}"#)]
    #[case::trailing_comma("[1,]")]
    #[case::trailing_comma_object(r#"{"a":1,}"#)]
    #[case::trailing_characters("{} x")]
    #[case::trailing_whitespace("{} \n\t\r")]
    #[case::two_documents("{}{}")]
    #[case::leading_zero("01")]
    #[case::minus_zero("-0")]
    #[case::bare_minus("-")]
    #[case::dot("1.")]
    #[case::dot_first(".5")]
    #[case::exponent_alone("1e")]
    #[case::exponent_sign("1e+")]
    #[case::exponent("1E-7")]
    #[case::huge_exponent("1e400")]
    #[case::tiny_exponent("1e-400")]
    #[case::zero_huge_exponent("0e999999999999")]
    #[case::long_integer("123456789012345678901234567890")]
    #[case::plus("+1")]
    #[case::hex("0x10")]
    #[case::nan("NaN")]
    #[case::literal_typo("tru")]
    #[case::literal_case("True")]
    #[case::control_char("\"a\u{1}b\"")]
    #[case::tab_in_string("\"a\tb\"")]
    #[case::del_in_string("\"a\u{7f}b\"")]
    #[case::escapes(r#""\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00""#)]
    #[case::bad_escape(r#""\x""#)]
    #[case::short_unicode(r#""\u12""#)]
    #[case::bad_hex(r#""\u12g4""#)]
    #[case::lone_lead(r#""\uD83D""#)]
    #[case::lone_lead_then_text(r#""\uD83Dx""#)]
    #[case::lead_then_escape(r#""\uD83D\n""#)]
    #[case::lead_lead(r#""\uD83D\uD83D""#)]
    #[case::lone_trail(r#""\uDE00""#)]
    #[case::unterminated("\"abc")]
    #[case::unterminated_escape("\"abc\\")]
    #[case::key_not_string("{1: 2}")]
    #[case::missing_colon(r#"{"a" 1}"#)]
    #[case::missing_value(r#"{"a":}"#)]
    #[case::single_quotes("'a'")]
    #[case::multibyte("\"grüße aus köln, 東京\"")]
    #[case::bom("\u{feff}{}")]
    #[case::nul_outside("{}\u{0}")]
    fn accepts_what_serde_json_accepts(#[case] input: &str) {
        assert_eq!(
            accepts(input.as_bytes()),
            serde_accepts(input.as_bytes()),
            "{input:?}"
        );
    }

    #[rstest]
    #[case::invalid_utf8(b"\"\xff\"".to_vec())]
    #[case::truncated_utf8(b"\"\xc3\"".to_vec())]
    #[case::overlong_utf8(b"\"\xc0\xaf\"".to_vec())]
    #[case::utf8_outside(b"[\xc3\xa9]".to_vec())]
    #[case::valid_utf8_in_long_string(format!("\"{}é{}\"", "a".repeat(13), "b".repeat(9)).into_bytes())]
    fn invalid_utf8_as_serde_json(#[case] input: Vec<u8>) {
        assert_eq!(accepts(&input), serde_accepts(&input), "{input:?}");
    }

    #[test]
    fn nesting_stops_where_serde_json_stops() {
        for depth in [126, 127, 128, 129] {
            for (open, close) in [("[", "]"), ("{\"k\":", "}")] {
                let doc = format!("{}1{}", open.repeat(depth), close.repeat(depth));
                assert_eq!(
                    accepts(doc.as_bytes()),
                    serde_accepts(doc.as_bytes()),
                    "{depth} {open}"
                );
            }
        }
        assert!(accepts(
            format!("{}{}", "[".repeat(127), "]".repeat(127)).as_bytes()
        ));
        assert!(!accepts(
            format!("{}{}", "[".repeat(128), "]".repeat(128)).as_bytes()
        ));
    }

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

    #[test]
    fn scalars_and_lists() {
        fn read(input: &str) -> Vec<Scalar<'_>> {
            read_document(input.as_bytes(), |r| r.read_list(|r| r.read_scalar()))
                .unwrap()
                .unwrap()
        }
        let items = read(r#"["a", 1, null, true, {"x": [1]}, []]"#);
        assert_eq!(items[0].str().as_deref(), Some("a"));
        assert_eq!(
            items[1..],
            [
                Scalar::Other,
                Scalar::Null,
                Scalar::Bool(true),
                Scalar::Other,
                Scalar::Other
            ]
        );
        assert_eq!(
            read_document(b"{}", |r| r.read_list(|r| r.read_scalar())).unwrap(),
            None
        );
    }

    /// Bytes near JSON: a document from a few fragments, then a few bytes changed.
    fn near_json() -> impl Strategy<Value = Vec<u8>> {
        let fragment = prop::sample::select(vec![
            "{", "}", "[", "]", ",", ":", "\"", "\\", "\"a\"", "\"k\":", "1", "-0.5e+3", "e", "E",
            ".", "0", "true", "null", "fals", " ", "\n", "\\u", "D83D", "DE00", "\\n", "é",
            "\u{1}",
        ]);
        (
            prop::collection::vec(fragment, 0..24),
            prop::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        )
            .prop_map(|(parts, edits)| {
                let mut bytes = parts.concat().into_bytes();
                for (at, byte) in edits {
                    if !bytes.is_empty() {
                        let at = at % bytes.len();
                        bytes[at] = byte;
                    }
                }
                bytes
            })
    }

    proptest! {
        #[test]
        fn agrees_with_serde_json(input in near_json()) {
            prop_assert_eq!(accepts(&input), serde_accepts(&input), "{:?}", String::from_utf8_lossy(&input));
        }

        #[test]
        fn nodes_are_values(value in any_json(), other in any_json()) {
            // The Value serde_json reads back (its float parsing is not exact).
            let text = serde_json::to_vec_pretty(&value).unwrap();
            let value: serde_json::Value = serde_json::from_slice(&text).unwrap();
            let node = read_document(&text, |r| r.read_node()).unwrap();
            prop_assert_eq!(&node, &Node::from_value(&value));
            prop_assert_eq!(node.to_json(), value.to_string());
            let other_text = serde_json::to_vec(&other).unwrap();
            let other: serde_json::Value = serde_json::from_slice(&other_text).unwrap();
            let other_node = read_document(&other_text, |r| r.read_node()).unwrap();
            prop_assert_eq!(node == other_node, value == other);
        }

        #[test]
        fn reads_what_serde_json_writes(value in any_json()) {
            let text = serde_json::to_vec(&value).unwrap();
            prop_assert!(accepts(&text));
            let pretty = serde_json::to_vec_pretty(&value).unwrap();
            prop_assert!(accepts(&pretty));
        }
    }

    pub fn any_json() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
