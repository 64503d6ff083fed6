//! The pull parser: JSON read as far as the rules read it, straight from the bytes the host
//! sends, into views that borrow their strings from the input ([`crate::reader::node`]),
//! skipping what no rule reads, instead of a `serde_json::Value` of everything (a pool list of
//! 1,000 items, the `managedFields` of both objects of a request).
//!
//! The reader accepts exactly what `serde_json::from_slice::<Value>` accepts, skipped values
//! included: the JSON grammar, UTF-8 strings without control characters, escapes with paired
//! surrogates, numbers within f64's range, at most 127 nested lists and objects. On a refusal
//! the caller asks serde_json for its message ([`serde_message`]), so a bad input gets the same
//! answer as when the whole payload is parsed into a `Value`. Views are lenient, as the rules
//! are: a value of an unexpected type reads as absent, never as an error, and a key given twice
//! counts with its last value (as in a `Value`).

use crate::reader::bytes::{hex4, special};
use crate::reader::node::{Node, Scalar, Str, Text};

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
    use proptest::test_runner::FileFailurePersistence;
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
        // Failures are kept beside this file (json.proptest-regressions), as for tests/properties.rs.
        #![proptest_config(ProptestConfig {
            failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
            ..ProptestConfig::default()
        })]

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
