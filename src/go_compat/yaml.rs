//! What gopkg.in/yaml.v3 v3.0.1 decodes a text into (`yaml.Unmarshal` into an `interface{}`),
//! as a [`Node`]: plain scalars resolved as its resolve.go does, timestamps as it re-emits them.

use std::borrow::Cow;

use serde_json::Number;
use yaml_rust2::parser::{Event, EventReceiver, Parser};
use yaml_rust2::scanner::TScalarStyle;

use crate::go_compat::number::{parse_float, parse_int};
use crate::reader::node::{Node, Str};

/// A user-data value as RKE2's defaulter reads it: a YAML map or list (an empty, comment-only or
/// null value is the empty map) stands for its content, written as sorted JSON after a NUL so it
/// never equals a plain text and a change is reported at `data.<key>` itself; `None` for
/// scalars and for YAML the defaulter would not read (or that this reading does not mirror:
/// tags, aliases, merge keys, duplicate keys), which is compared as text.
///
/// The defaulter decodes with gopkg.in/yaml.v3 (`yaml.Unmarshal` into a `map[string]interface{}`,
/// else a `[]interface{}`, only the first document), so plain scalars are resolved as yaml.v3's
/// resolve.go does ([`resolve_plain`]), not as YAML 1.2's core schema, and its re-emitted text
/// reads back as the same content: numbers compare by value (yaml.v3 writes a float64 with
/// `FormatFloat(f, 'g', -1)`, so a stored `30.0` comes back as `30`), timestamps as yaml.v3
/// re-emits them (RFC 3339). The top map's keys are the keys' own text, as yaml.v3 decodes a
/// key into a Go `string` (a plain null key is dropped).
pub(crate) fn parsed_yaml(text: &str) -> Option<String> {
    let mut events = Events(Vec::new());
    Parser::new_from_str(text).load(&mut events, false).ok()?;
    let mut events = events.0.into_iter().skip_while(|e| {
        matches!(
            e,
            Event::StreamStart | Event::DocumentStart | Event::Nothing
        )
    });
    let content = match events.next() {
        None | Some(Event::StreamEnd | Event::DocumentEnd) => Node::Object(Vec::new()),
        Some(Event::Scalar(value, TScalarStyle::Plain, _, None))
            if matches!(resolve_plain(&value), Scalar::Null) =>
        {
            Node::Object(Vec::new())
        }
        Some(first @ (Event::MappingStart(..) | Event::SequenceStart(..))) => {
            yaml_node(first, &mut events, 0)?
        }
        Some(_) => return None,
    };
    Some(format!("\u{0}yaml:{}", content.to_json()))
}

/// The parser's events, collected.
struct Events(Vec<Event>);

impl EventReceiver for Events {
    fn on_event(&mut self, event: Event) {
        self.0.push(event);
    }
}

/// Deeper YAML than this is compared as text (no recursion without bound).
const MAX_YAML_DEPTH: usize = 64;

/// The node that `first` and the events after it stand for, as yaml.v3 decodes it into an
/// `interface{}`; `depth` 0 is the top map, whose keys are their text.
fn yaml_node(
    first: Event,
    events: &mut impl Iterator<Item = Event>,
    depth: usize,
) -> Option<Node<'static>> {
    if depth > MAX_YAML_DEPTH {
        return None;
    }
    Some(match first {
        Event::Scalar(value, style, _, None) => scalar(&value, style).node(),
        Event::SequenceStart(_, None) => {
            let mut items = Vec::new();
            loop {
                match events.next()? {
                    Event::SequenceEnd => break,
                    item => items.push(yaml_node(item, events, depth + 1)?),
                }
            }
            Node::Array(items)
        }
        Event::MappingStart(_, None) => {
            let mut fields: Vec<(Str<'static>, Node<'static>)> = Vec::new();
            let mut texts: Vec<String> = Vec::new();
            loop {
                let (key, style) = match events.next()? {
                    Event::MappingEnd => break,
                    Event::Scalar(key, style, _, None) => (key, style),
                    _ => return None, // a map or list as a key: yaml.v3 refuses it
                };
                // yaml.v3 refuses a key's text twice, whatever its style; a merge key it merges.
                if key == "<<" || texts.contains(&key) {
                    return None;
                }
                texts.push(key.clone());
                let value = yaml_node(events.next()?, events, depth + 1)?;
                let key = match (depth, scalar(&key, style)) {
                    (0, Scalar::Null) => continue,
                    (0, _) => escaped(key),
                    (_, resolved) => resolved.key(),
                };
                if fields.iter().any(|(k, _)| k.to_str() == key.as_str()) {
                    return None; // two texts of one value (`8`, `010`): compared as text
                }
                fields.push((Str::Plain(Cow::Owned(key)), value));
            }
            Node::object(fields)
        }
        _ => return None, // tags, aliases
    })
}

/// A scalar's value as yaml.v3 resolves it.
#[derive(Debug, PartialEq)]
enum Scalar {
    Null,
    Bool(bool),
    Int(Number),
    Float(f64),
    /// As yaml.v3 re-emits a `time.Time`: RFC 3339 with nanoseconds, the offset kept.
    Timestamp(String),
    Str(String),
}

fn scalar(text: &str, style: TScalarStyle) -> Scalar {
    match style {
        TScalarStyle::Plain => resolve_plain(text),
        _ => Scalar::Str(text.to_string()),
    }
}

/// A string's text, a leading NUL doubled so it never equals the marked text of a value that is
/// no string.
fn escaped(text: String) -> String {
    if text.starts_with('\u{0}') {
        format!("\u{0}{text}")
    } else {
        text
    }
}

impl Scalar {
    fn node(self) -> Node<'static> {
        let text = |s: String| Node::String(Str::Plain(Cow::Owned(s)));
        match self {
            Scalar::Null => Node::Null,
            Scalar::Bool(b) => Node::Bool(b),
            Scalar::Int(n) => Node::Number(n),
            Scalar::Float(f) => match float_number(f) {
                Some(n) => Node::Number(n),
                None => text(format!("\u{0}float:{}", float_text(f))),
            },
            Scalar::Timestamp(t) => text(format!("\u{0}timestamp:{t}")),
            Scalar::Str(s) => text(escaped(s)),
        }
    }

    /// A nested map's key: a string is its text, any other value its marked JSON text.
    fn key(self) -> String {
        match self.node() {
            Node::String(s) => s.to_str().into_owned(),
            other => format!("\u{0}{}", other.to_json()),
        }
    }
}

/// A float as the number it compares as: an integral value as the integer yaml.v3 re-emits
/// (`30.0` is written `30`), `None` for infinities and NaN.
fn float_number(f: f64) -> Option<Number> {
    // -2^63 <= f < 2^63: exactly representable bounds, so the cast is exact.
    if f.fract() == 0.0 && (i64::MIN as f64..-(i64::MIN as f64)).contains(&f) {
        return Some(Number::from(f as i64));
    }
    Number::from_f64(f)
}

fn float_text(f: f64) -> &'static str {
    match f {
        f if f.is_nan() => ".nan",
        f if f > 0.0 => ".inf",
        _ => "-.inf",
    }
}

/// A plain scalar as gopkg.in/yaml.v3 v3.0.1 resolves it (resolve.go `resolve` with no tag):
/// - null: empty, `~`, `null`, `Null`, `NULL`; bool: `true`/`True`/`TRUE`, `false`/`False`/`FALSE`
///   only (`yes`, `on`, `y` are strings); `.inf`, `+.inf`, `-.inf`, `.nan` in those three cases;
/// - a text starting with `.` is a float if Go's `ParseFloat` reads it (`.5`);
/// - a text starting with a digit or sign: a timestamp (`parseTimestamp`), else, with every `_`
///   removed, an integer as Go's `ParseInt(s, 0, 64)` reads it (sign; `0x`, `0o`, `0b` and a
///   leading `0` for octal, so `010` is 8), else `ParseUint`, else a float of the form
///   `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` (`1e3`, `1_000.5`, `09`);
/// - anything else is a string.
fn resolve_plain(text: &str) -> Scalar {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Scalar::Null,
        "true" | "True" | "TRUE" => return Scalar::Bool(true),
        "false" | "False" | "FALSE" => return Scalar::Bool(false),
        ".nan" | ".NaN" | ".NAN" => return Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Scalar::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Scalar::Float(f64::NEG_INFINITY),
        _ => {}
    }
    let string = || Scalar::Str(text.to_string());
    match text.as_bytes()[0] {
        b'.' => match parse_float(text) {
            Some(f) if is_float_text(&text[1..], true) => Scalar::Float(f),
            _ => string(),
        },
        b'0'..=b'9' | b'+' | b'-' => {
            if let Some(t) = timestamp(text) {
                return Scalar::Timestamp(t);
            }
            let plain = text.replace('_', "");
            if let Some(n) = parse_int(&plain) {
                return Scalar::Int(n);
            }
            match parse_float(&plain) {
                Some(f)
                    if is_float_text(plain.strip_prefix(['+', '-']).unwrap_or(&plain), false) =>
                {
                    Scalar::Float(f)
                }
                _ => string(),
            }
        }
        _ => string(),
    }
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` for a text without its sign; `after_dot`:
/// the text's leading `.` was already taken.
fn is_float_text(s: &str, after_dot: bool) -> bool {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let mut rest = s;
    if after_dot {
        let n = digits(rest);
        if n == 0 {
            return false;
        }
        rest = &rest[n..];
    } else if let Some(fraction) = rest.strip_prefix('.') {
        let n = digits(fraction);
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    } else {
        let n = digits(rest);
        if n == 0 {
            return false;
        }
        rest = &rest[n..];
        if let Some(fraction) = rest.strip_prefix('.') {
            rest = &fraction[digits(fraction)..];
        }
    }
    match rest.as_bytes().first() {
        None => true,
        Some(b'e' | b'E') => {
            let exponent = rest[1..].trim_start_matches(['+', '-']);
            let signs = rest.len() - 1 - exponent.len();
            signs <= 1 && !exponent.is_empty() && digits(exponent) == exponent.len()
        }
        Some(_) => false,
    }
}

/// yaml.v3's `parseTimestamp`: four digits and `-`, then Go's `time.Parse` with one of
/// `2006-1-2T15:4:5.999999999Z07:00` (or a lower-case `t`), `2006-1-2 15:4:5.999999999` (no
/// zone: UTC), `2006-1-2`; the value as yaml.v3 re-emits it (`time.RFC3339Nano`).
fn timestamp(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return None;
    }
    let mut rest = &s[5..];
    let year: u32 = s[..4].parse().ok()?;
    let month = one_or_two_digits(&mut rest)?;
    rest = rest.strip_prefix('-')?;
    let day = one_or_two_digits(&mut rest)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in(month, year) {
        return None;
    }
    let date = format!("{year:04}-{month:02}-{day:02}");
    if rest.is_empty() {
        return Some(format!("{date}T00:00:00Z"));
    }
    let zoned = match rest.as_bytes()[0] {
        b'T' | b't' => {
            rest = &rest[1..];
            true
        }
        b' ' => {
            rest = rest.trim_start_matches(' ');
            false
        }
        _ => return None,
    };
    let hour = one_or_two_digits(&mut rest)?;
    rest = rest.strip_prefix(':')?;
    let minute = one_or_two_digits(&mut rest)?;
    rest = rest.strip_prefix(':')?;
    let second = one_or_two_digits(&mut rest)?;
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut nanos = String::new();
    if let [b'.' | b',', d, ..] = rest.as_bytes() {
        if d.is_ascii_digit() {
            let n = rest[1..].bytes().take_while(u8::is_ascii_digit).count();
            nanos = rest[1..1 + n.min(9)].trim_end_matches('0').to_string();
            rest = &rest[1 + n..];
        }
    }
    let fraction = if nanos.is_empty() {
        String::new()
    } else {
        format!(".{nanos}")
    };
    let zone = if !zoned {
        "Z".to_string()
    } else if let Some(r) = rest.strip_prefix('Z') {
        rest = r;
        "Z".to_string()
    } else {
        let z = rest.as_bytes();
        if z.len() < 6 || z[3] != b':' || !(z[0] == b'+' || z[0] == b'-') {
            return None;
        }
        let two = |t: &[u8]| {
            (t[0].is_ascii_digit() && t[1].is_ascii_digit())
                .then(|| u32::from(t[0] - b'0') * 10 + u32::from(t[1] - b'0'))
        };
        let (hours, minutes) = (two(&z[1..3])?, two(&z[4..6])?);
        if hours > 24 || minutes > 60 {
            return None;
        }
        rest = &rest[6..];
        let offset = hours * 60 + minutes;
        if offset == 0 {
            "Z".to_string()
        } else {
            format!("{}{:02}:{:02}", z[0] as char, offset / 60, offset % 60)
        }
    };
    if !rest.is_empty() {
        return None;
    }
    Some(format!(
        "{date}T{hour:02}:{minute:02}:{second:02}{fraction}{zone}"
    ))
}

/// Go's `getnum(s, false)`: one digit, or two.
fn one_or_two_digits(rest: &mut &str) -> Option<u32> {
    let n = rest.bytes().take(2).take_while(u8::is_ascii_digit).count();
    if n == 0 {
        return None;
    }
    let value = rest[..n].parse().ok()?;
    *rest = &rest[n..];
    Some(value)
}

fn days_in(month: u32, year: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// Plain scalars as yaml.v3 v3.0.1's resolve.go resolves them.
    #[rstest]
    #[case::empty("", Scalar::Null)]
    #[case::tilde("~", Scalar::Null)]
    #[case::null_capitalised("Null", Scalar::Null)]
    #[case::true_upper("TRUE", Scalar::Bool(true))]
    #[case::false_capitalised("False", Scalar::Bool(false))]
    #[case::yes("yes", Scalar::Str("yes".into()))]
    #[case::on("on", Scalar::Str("on".into()))]
    #[case::y("y", Scalar::Str("y".into()))]
    #[case::decimal("30", Scalar::Int(30.into()))]
    #[case::plus("+5", Scalar::Int(5.into()))]
    #[case::minus("-5", Scalar::Int((-5).into()))]
    #[case::zero("0", Scalar::Int(0.into()))]
    #[case::octal_leading_zero("010", Scalar::Int(8.into()))]
    #[case::negative_octal("-010", Scalar::Int((-8).into()))]
    #[case::not_octal_is_a_float("09", Scalar::Float(9.0))]
    #[case::octal_0o("0o17", Scalar::Int(15.into()))]
    #[case::hex("0x1F", Scalar::Int(31.into()))]
    #[case::hex_upper_prefix("0X1f", Scalar::Int(31.into()))]
    #[case::binary("0b101", Scalar::Int(5.into()))]
    #[case::negative_binary("-0b101", Scalar::Int((-5).into()))]
    #[case::underscores("1_000", Scalar::Int(1000.into()))]
    #[case::hex_underscores("0x_1F", Scalar::Int(31.into()))]
    #[case::leading_underscore("_1", Scalar::Str("_1".into()))]
    #[case::prefix_alone("0x", Scalar::Str("0x".into()))]
    #[case::min_i64("-9223372036854775808", Scalar::Int(i64::MIN.into()))]
    #[case::past_i64_is_u64("18446744073709551615", Scalar::Int(u64::MAX.into()))]
    #[case::past_u64_is_a_float("18446744073709551616", Scalar::Float(18446744073709551616.0))]
    #[case::plus_past_i64_is_a_float("+9223372036854775808", Scalar::Float(9223372036854775808.0))]
    #[case::float("30.0", Scalar::Float(30.0))]
    #[case::trailing_point("5.", Scalar::Float(5.0))]
    #[case::exponent("1e3", Scalar::Float(1000.0))]
    #[case::signed_exponent("-1.5E-3", Scalar::Float(-0.0015))]
    #[case::point_first(".5", Scalar::Float(0.5))]
    #[case::signed_point_first("+.5", Scalar::Float(0.5))]
    #[case::float_underscores("1_000.5", Scalar::Float(1000.5))]
    #[case::point_underscores(".5_0", Scalar::Str(".5_0".into()))]
    #[case::overflowing_float("1e999", Scalar::Str("1e999".into()))]
    #[case::inf(".inf", Scalar::Float(f64::INFINITY))]
    #[case::minus_inf("-.Inf", Scalar::Float(f64::NEG_INFINITY))]
    #[case::go_words("inf", Scalar::Str("inf".into()))]
    #[case::double_sign("+-5", Scalar::Str("+-5".into()))]
    #[case::base_60("1:20", Scalar::Str("1:20".into()))]
    #[case::date("2001-12-14", Scalar::Timestamp("2001-12-14T00:00:00Z".into()))]
    #[case::short_date("2001-2-3", Scalar::Timestamp("2001-02-03T00:00:00Z".into()))]
    #[case::leap_day("2000-02-29", Scalar::Timestamp("2000-02-29T00:00:00Z".into()))]
    #[case::no_leap_day("1900-02-29", Scalar::Str("1900-02-29".into()))]
    #[case::bad_month("2001-13-01", Scalar::Str("2001-13-01".into()))]
    #[case::rfc3339("2001-12-14T21:59:43.10Z", Scalar::Timestamp("2001-12-14T21:59:43.1Z".into()))]
    #[case::offset("2001-12-14t21:59:43+05:30", Scalar::Timestamp("2001-12-14T21:59:43+05:30".into()))]
    #[case::zero_offset("2001-12-14T21:59:43-00:00", Scalar::Timestamp("2001-12-14T21:59:43Z".into()))]
    #[case::no_zone_after_t("2001-12-14T21:59:43", Scalar::Str("2001-12-14T21:59:43".into()))]
    #[case::space_no_zone("2001-12-14  1:2:3.123456789123", Scalar::Timestamp("2001-12-14T01:02:03.123456789Z".into()))]
    #[case::space_short_zone("2001-12-14 21:59:43.10 -5", Scalar::Str("2001-12-14 21:59:43.10 -5".into()))]
    #[case::words("just words", Scalar::Str("just words".into()))]
    fn plain_scalars_as_yaml_v3_resolves_them(#[case] text: &str, #[case] expected: Scalar) {
        assert_eq!(resolve_plain(text), expected);
    }

    /// No text makes the reading panic; odd ones are text or content, never an error.
    #[test]
    fn odd_yaml_never_panics() {
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        for text in [
            "-",
            "+",
            ".",
            "0b",
            "-0",
            "-0x",
            "0o",
            "9999-99-99",
            "2001-",
            "2001-1",
            "2001-1-1T",
            "2001-1-1T1:1:1.",
            "2001-1-1T1:1:1+",
            "2001-1-1T1:1:1+5:00",
            "2001-1-1T1:1:1+99:99",
            "\u{0}",
            "[\u{0}]",
            "{\"\\0\": 1}",
            "- é\n- 1é",
            "{? [a]: b}",
            "&a [*a]",
            deep.as_str(),
        ] {
            let _ = parsed_yaml(text);
            let _ = resolve_plain(text);
        }
        assert_eq!(parsed_yaml(&deep), None);
    }

    #[test]
    fn unreadable_yaml_and_scalars_stay_text() {
        for text in ["[unclosed", "just words", "42", "*alias"] {
            assert_eq!(parsed_yaml(text), None, "{text}");
        }
        assert_eq!(parsed_yaml(""), parsed_yaml("\n  {}\n  "));
        assert_eq!(
            parsed_yaml("{a: 1, b: [x]}"),
            parsed_yaml("b:\n- x\na: 1\n")
        );
        assert_ne!(parsed_yaml("{a: 1}"), parsed_yaml("{a: '1'}"));
    }

    /// The text a user-data value stands for: sorted JSON after a NUL, as serde_json writes it.
    #[rstest]
    #[case::map("b: 1\na: x", Some("{\"a\":\"x\",\"b\":1}"))]
    #[case::list(
        "- 1\n- 2.50\n- {k: v}\n- true\n- ~",
        Some("[1,2.5,{\"k\":\"v\"},true,null]")
    )]
    #[case::empty("", Some("{}"))]
    #[case::comment_only("# none yet", Some("{}"))]
    // yaml.v3 decodes the top map's keys into Go strings: their text; a null key is dropped.
    #[case::top_keys_are_their_text(
        "1: a\ntrue: b\n~: c\n010: d",
        Some("{\"010\":\"d\",\"1\":\"a\",\"true\":\"b\"}")
    )]
    // Deeper keys keep their type: a number key is not the string of its digits.
    #[case::nested_keys_keep_their_type(
        "x: {1: a, '2': b, 010: c}",
        Some("{\"x\":{\"\\u00001\":\"a\",\"\\u00008\":\"c\",\"2\":\"b\"}}")
    )]
    #[case::infinity("x: .inf", Some("{\"x\":\"\\u0000float:.inf\"}"))]
    #[case::null_document("~", Some("{}"))]
    #[case::tagged("x: !!str 5", None)]
    #[case::merge_key("x: {<<: {a: 1}}", None)]
    #[case::duplicate_key("{a: 1, a: 2}", None)]
    #[case::duplicate_key_text("x: {1: a, '1': b}", None)]
    #[case::duplicate_null_key("~: a\nnull: b\n~: c", None)]
    #[case::escaped("x: \"q\\\"\\n\"", Some("{\"x\":\"q\\\"\\n\"}"))]
    #[case::a_scalar("plain text", None)]
    #[case::unreadable("a: [", None)]
    fn user_data_as_the_defaulter_reads_it(#[case] text: &str, #[case] json: Option<&str>) {
        assert_eq!(parsed_yaml(text), json.map(|j| format!("\u{0}yaml:{j}")));
    }
}
