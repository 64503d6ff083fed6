//! Go's `time.ParseDuration` (the text of a `metav1.Duration`), to whole nanoseconds.

/// Go's time.ParseDuration, to whole nanoseconds: an optional sign, then `0` or one or more
/// decimal numbers (a fraction allowed) each with its unit, `ns`, `us` (`µs`, `μs`), `ms`, `s`,
/// `m`, `h`. `None` for anything Go refuses.
pub(crate) fn parse_nanos(text: &str) -> Option<i128> {
    let (sign, mut rest) = match text.strip_prefix('-') {
        Some(r) => (-1, r),
        None => (1, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
        let whole_len = digits(rest);
        let whole = &rest[..whole_len];
        rest = &rest[whole_len..];
        let mut fraction = "";
        if let Some(r) = rest.strip_prefix('.') {
            let len = digits(r);
            fraction = &r[..len];
            rest = &r[len..];
        }
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(i, _)| i);
        let unit: i128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let mut value = whole.checked_mul(unit)?;
        if !fraction.is_empty() {
            let digits = fraction.len().min(18) as u32;
            let numerator: i128 = fraction[..digits as usize].parse().ok()?;
            value =
                value.checked_add(numerator.checked_mul(unit)? / 10i128.checked_pow(digits)?)?;
        }
        total = total.checked_add(value)?;
    }
    Some(sign * total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// time.ParseDuration's documented example (`10h`, `1h10m10s`, `1µs`, `1us`), its doc
    /// string's `1h15m30.918273645s`, then the forms CAPI v1.10's defaulter wrote in the cluster
    /// test (`5m` stored, `5m0s` read back) and what Go refuses.
    #[rstest]
    #[case::go_example_hours("10h", Some(36_000_000_000_000))]
    #[case::go_example_complex("1h10m10s", Some(4_210_000_000_000))]
    #[case::go_example_micro("1\u{b5}s", Some(1_000))]
    #[case::go_example_micro_ascii("1us", Some(1_000))]
    #[case::go_doc_nanoseconds("1h15m30.918273645s", Some(4_530_918_273_645))]
    #[case::greek_mu("1\u{3bc}s", Some(1_000))]
    #[case::minutes("5m", Some(300_000_000_000))]
    #[case::as_go_writes_it("5m0s", Some(300_000_000_000))]
    #[case::hours_and_minutes("1h30m", Some(5_400_000_000_000))]
    #[case::fraction("1.5s", Some(1_500_000_000))]
    #[case::leading_dot(".5s", Some(500_000_000))]
    #[case::micro_sign("3\u{b5}s", Some(3_000))]
    #[case::zero("0", Some(0))]
    #[case::negative("-2m", Some(-120_000_000_000))]
    #[case::no_unit("5", None)]
    #[case::unknown_unit("5d", None)]
    #[case::empty("", None)]
    #[case::only_a_sign("-", None)]
    #[case::overflow("99999999999999999999999999999999999999h", None)]
    fn durations_are_read_as_go_reads_them(#[case] text: &str, #[case] nanos: Option<i128>) {
        assert_eq!(parse_nanos(text), nanos);
    }
}
