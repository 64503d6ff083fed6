//! Go's `strconv` number parsing, as yaml.v3 calls it on a plain scalar.

use serde_json::Number;

/// Go's `ParseInt(s, 0, 64)`, else `ParseUint(s, 0, 64)` (no sign).
pub(crate) fn parse_int(s: &str) -> Option<Number> {
    let (negative, unsigned) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = match unsigned.as_bytes() {
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'x') => (16, &unsigned[2..]),
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'o') => (8, &unsigned[2..]),
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'b') => (2, &unsigned[2..]),
        [b'0', ..] => (8, &unsigned[1..]),
        [] => return None,
        _ => (10, unsigned),
    };
    if !digits.bytes().all(|c| (c as char).is_digit(radix)) {
        return None;
    }
    // "0" alone: octal with no digits after the prefix, which Go reads as 0.
    let magnitude = if digits.is_empty() {
        0
    } else {
        u64::from_str_radix(digits, radix).ok()?
    };
    if negative {
        let value = 0i64.checked_sub_unsigned(magnitude)?;
        Some(Number::from(value))
    } else if s.starts_with('+') {
        i64::try_from(magnitude).ok().map(Number::from)
    } else {
        Some(Number::from(magnitude))
    }
}

/// Go's `ParseFloat(s, 64)` for the decimal forms checked by yaml.v3's float pattern (`go_compat::yaml`): out of range is
/// an error, not an infinity.
pub(crate) fn parse_float(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// strconv's documented base-0 rules: the prefix after the sign picks the base (`0b`, `0o`
    /// or a leading `0`, `0x`), else 10; ParseInt's range first, ParseUint's after it.
    #[rstest]
    #[case::decimal("-354634382", Some(Number::from(-354634382i64)))]
    #[case::hex("0x1f", Some(Number::from(31)))]
    #[case::hex_upper("0X1F", Some(Number::from(31)))]
    #[case::octal_o("0o17", Some(Number::from(15)))]
    #[case::octal_leading_zero("017", Some(Number::from(15)))]
    #[case::binary("0b101", Some(Number::from(5)))]
    #[case::zero("0", Some(Number::from(0)))]
    #[case::plus("+5", Some(Number::from(5)))]
    #[case::int64_max("9223372036854775807", Some(Number::from(i64::MAX)))]
    #[case::uint64_beyond_int64("9223372036854775808", Some(Number::from(9223372036854775808u64)))]
    #[case::int64_min("-9223372036854775808", Some(Number::from(i64::MIN)))]
    #[case::below_int64_min("-9223372036854775809", None)]
    #[case::plus_beyond_int64("+9223372036854775808", None)]
    #[case::octal_nine("09", None)]
    #[case::bare_prefix("0x", None)]
    #[case::empty("", None)]
    #[case::sign_only("-", None)]
    fn integers_as_strconv_reads_them(#[case] text: &str, #[case] expected: Option<Number>) {
        assert_eq!(parse_int(text), expected);
    }

    #[rstest]
    #[case::plain("3.25", Some(3.25))]
    #[case::exponent("1e3", Some(1000.0))]
    #[case::leading_dot(".5", Some(0.5))]
    #[case::out_of_range("1e400", None)]
    #[case::words("x", None)]
    fn floats_as_strconv_reads_them(#[case] text: &str, #[case] expected: Option<f64>) {
        assert_eq!(parse_float(text), expected);
    }
}
