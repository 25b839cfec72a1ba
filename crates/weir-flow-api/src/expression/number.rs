//! Numbers as NiFi's expression language has them: whole numbers (a Java `long`) and decimals
//! (a Java `double`), read from text and written as text the way NiFi, running on Java, does.

use std::fmt;

/// A number in an expression: NiFi keeps the two kinds apart, and arithmetic on two whole
/// numbers stays whole (wrapping on overflow, as Java's `long` does).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Number {
    /// A whole number.
    Whole(i64),
    /// A decimal.
    Decimal(f64),
}

impl Number {
    /// As a whole number: a decimal cut toward zero, saturating at the ends and 0 for NaN,
    /// as Java's `(long)` cast.
    pub(crate) fn whole(self) -> i64 {
        match self {
            Number::Whole(n) => n,
            Number::Decimal(d) => d as i64,
        }
    }

    /// As a decimal (a whole number beyond 2^53 rounded, as Java's `(double)`).
    pub(crate) fn decimal(self) -> f64 {
        match self {
            Number::Whole(n) => n as f64,
            Number::Decimal(d) => d,
        }
    }
}

/// Text that reads as a number but cannot be one: a whole number outside Java's `long`, or
/// a hexadecimal decimal without its `p` exponent (Java's `Double.valueOf` refuses both).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{0}` is out of range for a number")]
pub(crate) struct OutOfRange(pub String);

/// Reads `text` as NiFi converts text to a number (`toNumber`, `toDecimal`, arithmetic):
/// trimmed of blanks; then a whole number is decimal digits or `0x` and hex digits, with an
/// optional sign; a decimal is one of Java's floating-point forms (`1.5`, `1e3`, `1.5E-3`,
/// `.5`, hexadecimal `0x1.8p3`, `Infinity`, `NaN`). Anything else is no number (`None`):
/// NiFi gives no value for it rather than failing.
///
/// # Errors
/// [`OutOfRange`] for a whole number beyond 64 bits, as Java's `Long.decode` refuses it.
pub(crate) fn parse(text: &str) -> Result<Option<Number>, OutOfRange> {
    let t = text.trim_matches(|c: char| c <= ' ');
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let out_of_range = || OutOfRange(t.to_string());
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let hex_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    let hex = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X"));
    // Whole numbers first: `Long.valueOf`, then `Long.decode` for hexadecimal.
    if digits(body) {
        let n = t.parse::<i64>().map_err(|_| out_of_range())?;
        return Ok(Some(Number::Whole(n)));
    }
    if let Some(h) = hex.filter(|h| hex_digits(h)) {
        let magnitude = u64::from_str_radix(h, 16).map_err(|_| out_of_range())?;
        let n = if negative {
            // `-0x8000000000000000` is the least long, as `Long.decode` reads it.
            0i64.checked_sub_unsigned(magnitude)
        } else {
            i64::try_from(magnitude).ok()
        };
        return n.map(|n| Some(Number::Whole(n))).ok_or_else(out_of_range);
    }
    let sign = if negative { -1.0 } else { 1.0 };
    match body {
        "Infinity" => return Ok(Some(Number::Decimal(sign * f64::INFINITY))),
        "NaN" => return Ok(Some(Number::Decimal(f64::NAN))),
        _ => {}
    }
    if let Some(h) = hex {
        return hex_decimal(h).map(|d| d.map(|d| Number::Decimal(sign * d)));
    }
    // Base 10: `1.5`, `1e3`, `1.5e3`, `.5`, `.5e3`; not `1.` nor `1.e3`.
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)));
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => (int.is_empty() || digits(int)) && digits(frac),
        None => digits(mantissa) && exponent.is_some(),
    };
    if !(exponent_ok && mantissa_ok) {
        return Ok(None);
    }
    // The standard library reads decimal text correctly rounded, as Java does.
    Ok(t.trim_start_matches('+')
        .parse::<f64>()
        .ok()
        .map(Number::Decimal))
}

/// A hexadecimal decimal after its `0x`: hex digits with an optional fraction and a binary
/// exponent (`F1.5Bp2`), or a fraction alone with an optional one (`.8`); `None` when the
/// text is not of that form. Rounded to the nearest double, ties to even, as Java reads it.
///
/// # Errors
/// [`OutOfRange`] for `.8` without an exponent: NiFi accepts the form but Java cannot read it.
fn hex_decimal(text: &str) -> Result<Option<f64>, OutOfRange> {
    let (mantissa, exponent) = match text.find(['p', 'P']) {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let hex_ok = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex_ok(int) || !hex_ok(frac) || (int.is_empty() && frac.is_empty()) {
        return Ok(None);
    }
    let exponent_value = match exponent {
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Ok(None);
            }
            // Saturate: any exponent past a few thousand gives infinity or zero anyway.
            let magnitude = digits.parse::<i64>().unwrap_or(i64::MAX).min(1 << 20);
            if e.starts_with('-') {
                -magnitude
            } else {
                magnitude
            }
        }
        // Only a fraction alone may go without its exponent, and then Java refuses it.
        None if int.is_empty() => return Err(OutOfRange(format!("0x{text}"))),
        None => return Ok(None),
    };
    // Up to 29 significant hex digits (116 bits) are kept exactly; any further nonzero digit
    // only breaks a tie when rounding.
    let mut mantissa: u128 = 0;
    let mut sticky = false;
    let mut binary_exponent = exponent_value - 4 * frac.len() as i64;
    for d in int.bytes().chain(frac.bytes()) {
        let d = (d as char).to_digit(16).expect("checked as a hex digit") as u128;
        if mantissa >> 112 == 0 {
            mantissa = mantissa * 16 + d;
        } else {
            sticky |= d != 0;
            binary_exponent += 4;
        }
    }
    Ok(Some(round_to_double(mantissa, sticky, binary_exponent)))
}

/// `mantissa` × 2^`exponent` (plus a little more when `sticky`) rounded to the nearest
/// double, ties to even, with subnormals rounded at their own precision.
fn round_to_double(mantissa: u128, sticky: bool, exponent: i64) -> f64 {
    if mantissa == 0 {
        return 0.0;
    }
    let bits = 128 - i64::from(mantissa.leading_zeros());
    let top = bits - 1 + exponent; // the value is in [2^top, 2^(top+1))
    if top > 1023 {
        return f64::INFINITY;
    }
    // Significant bits the result can hold: 53, fewer below the normal range.
    let precision = if top >= -1022 { 53 } else { 53 - (-1022 - top) };
    if precision < 0 {
        return 0.0; // below half the least subnormal
    }
    let shift = bits - precision;
    let (kept, scale) = if shift <= 0 {
        (mantissa, exponent)
    } else {
        let shift = shift as u32; // at most 129
        let kept = mantissa.checked_shr(shift).unwrap_or(0);
        let dropped = if shift >= 128 {
            mantissa
        } else {
            mantissa & ((1u128 << shift) - 1)
        };
        let round_up = match 1u128.checked_shl(shift - 1) {
            Some(half) => dropped > half || (dropped == half && (sticky || kept & 1 == 1)),
            None => false, // half is 2^128: more than any dropped part
        };
        (kept + u128::from(round_up), exponent + i64::from(shift))
    };
    // `kept` has at most 54 bits and the product is a double (or overflows): exact.
    scale_by_power_of_two(kept as f64, scale)
}

/// `x` × 2^`k`, in steps that stay within the normal range of doubles.
fn scale_by_power_of_two(mut x: f64, mut k: i64) -> f64 {
    let power = |k: i64| f64::from_bits(((k + 1023) as u64) << 52);
    while k > 1000 {
        x *= power(1000);
        k -= 1000;
    }
    while k < -1000 {
        x *= power(-1000);
        k += 1000;
    }
    x * power(k)
}

/// A decimal written as Java's `Double.toString` writes it (and so NiFi): the fewest digits
/// that read back as the same double, `5.0` with at least one fraction digit, and from 10^7 up
/// or below 10^-3 in computerized scientific form (`1.0E10`, `1.0E-5`); `NaN`, `Infinity`.
pub(crate) struct JavaDouble(pub f64);

impl fmt::Display for JavaDouble {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = self.0;
        if x.is_nan() {
            return f.write_str("NaN");
        }
        if x.is_infinite() {
            return f.write_str(if x > 0.0 { "Infinity" } else { "-Infinity" });
        }
        if x == 0.0 {
            return f.write_str(if x.is_sign_negative() { "-0.0" } else { "0.0" });
        }
        if x < 0.0 {
            f.write_str("-")?;
        }
        let (digits, exponent) = shortest_digits(x.abs());
        // `digits` are d1 d2 ... dn, the value d1.d2...dn × 10^exponent.
        if (-3..7).contains(&exponent) {
            if exponent < 0 {
                f.write_str("0.")?;
                for _ in 0..(-exponent - 1) {
                    f.write_str("0")?;
                }
                f.write_str(&digits)
            } else {
                let int_len = exponent as usize + 1;
                if digits.len() <= int_len {
                    f.write_str(&digits)?;
                    for _ in digits.len()..int_len {
                        f.write_str("0")?;
                    }
                    f.write_str(".0")
                } else {
                    write!(f, "{}.{}", &digits[..int_len], &digits[int_len..])
                }
            }
        } else {
            let (first, rest) = digits.split_at(1);
            let rest = if rest.is_empty() { "0" } else { rest };
            write!(f, "{first}.{rest}E{exponent}")
        }
    }
}

/// The decimal digits Java (since 19) writes for a positive finite `x`, and the power of ten
/// of the first: the shortest that read back as `x`, except that where one digit would do,
/// Java takes the closest of one or two digits (`4.9E-324`, not `5.0E-324`).
fn shortest_digits(x: f64) -> (String, i32) {
    let split = |s: &str| -> (String, i32) {
        let (mantissa, exponent) = s.split_once('e').expect("`{:e}` writes an exponent");
        let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
        let digits = digits.trim_end_matches('0');
        let digits = if digits.is_empty() { "0" } else { digits };
        (
            digits.to_string(),
            exponent.parse().expect("`{:e}` writes a whole exponent"),
        )
    };
    let shortest = split(&format!("{x:e}"));
    if shortest.0.len() == 1 {
        let two = format!("{x:.1e}");
        if two.parse::<f64>() == Ok(x) {
            return split(&two);
        }
    }
    shortest
}

/// `n` in base `radix` as Java's `Long.toString(n, radix)` writes it: lower-case digits, a
/// `-` before a negative one, base 10 for a radix outside 2..=36.
pub(crate) fn to_radix(n: i64, radix: i64) -> String {
    let radix = if (2..=36).contains(&radix) {
        radix as u64
    } else {
        10
    };
    let mut magnitude = n.unsigned_abs();
    let mut digits = Vec::new();
    loop {
        let d = (magnitude % radix) as u32;
        digits.push(char::from_digit(d, radix as u32).expect("a digit below the radix"));
        magnitude /= radix;
        if magnitude == 0 {
            break;
        }
    }
    if n < 0 {
        digits.push('-');
    }
    digits.iter().rev().collect()
}

/// Reads `text` in base `radix` as Java's `Long.parseLong(text, radix)`: an optional sign
/// and digits of the base (either case); `None` for anything else, a radix outside 2..=36 or
/// a value beyond 64 bits.
pub(crate) fn from_radix(text: &str, radix: i64) -> Option<i64> {
    if !(2..=36).contains(&radix) {
        return None;
    }
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    // `from_str_radix` would take a second sign; Java does not.
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix as u32).ok()?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn java(x: f64) -> String {
        JavaDouble(x).to_string()
    }

    #[test]
    fn doubles_are_written_as_java_writes_them() {
        for (x, want) in [
            (5.0, "5.0"),
            (-5.5, "-5.5"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1e10, "1.0E10"),
            (1e-5, "1.0E-5"),
            (1.5e-3, "0.0015"),
            (0.001, "0.001"),
            (0.000999, "9.99E-4"),
            (1234567.0, "1234567.0"),
            (9999999.0, "9999999.0"),
            (1e7, "1.0E7"),
            (12345678.9, "1.23456789E7"),
            (100.0, "100.0"),
            (0.1 + 0.2, "0.30000000000000004"),
            (f64::MAX, "1.7976931348623157E308"),
            (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
            (5e-324, "4.9E-324"),
            (2e23, "2.0E23"),
            (1.0 / 3.0, "0.3333333333333333"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::NAN, "NaN"),
            (-1250.0, "-1250.0"),
            (9.876_543_210_012_345e132, "9.876543210012345E132"),
        ] {
            assert_eq!(java(x), want, "{x:e}");
        }
    }

    #[test]
    fn text_reads_as_nifi_reads_a_number() {
        let whole = |t: &str| parse(t).unwrap().map(Number::whole);
        let decimal = |t: &str| match parse(t).unwrap() {
            Some(Number::Decimal(d)) => Some(d),
            _ => None,
        };
        assert_eq!(whole("42"), Some(42));
        assert_eq!(whole(" -7\n"), Some(-7));
        assert_eq!(whole("+5"), Some(5));
        assert_eq!(whole("007"), Some(7));
        assert_eq!(whole("0x1F"), Some(31));
        assert_eq!(whole("-0X1f"), Some(-31));
        assert_eq!(whole("-0x8000000000000000"), Some(i64::MIN));
        assert_eq!(whole("9223372036854775807"), Some(i64::MAX));
        assert!(parse("9223372036854775808").is_err());
        assert!(parse("0x8000000000000000").is_err());
        assert_eq!(decimal("1.332"), Some(1.332));
        assert_eq!(decimal("-12.5e+2"), Some(-1250.0));
        assert_eq!(decimal(".5"), Some(0.5));
        assert_eq!(decimal("+.5E-2"), Some(0.005));
        assert_eq!(decimal("1e3"), Some(1000.0));
        assert_eq!(decimal("0xF.Fp10"), Some(16320.0));
        assert_eq!(decimal("0xF1.p2"), Some(964.0));
        assert_eq!(decimal("-0x.5BP0"), Some(-0.35546875));
        assert_eq!(decimal("Infinity"), Some(f64::INFINITY));
        assert_eq!(decimal("-Infinity"), Some(f64::NEG_INFINITY));
        assert!(decimal("NaN").unwrap().is_nan());
        for not_a_number in [
            "",
            " ",
            "-",
            "+",
            "1.",
            "1.e3",
            ".",
            "e3",
            "1e",
            "1e+",
            "A.1e123",
            "0.Ae123",
            "0.1eA",
            "0xG.1p123",
            "0x1.Gp123",
            "0x1.1pA",
            "0x1.1",
            "0x",
            "0x.p1",
            "inf",
            "infinity",
            "nan",
            "1_000",
            "1 000",
            "--1",
            "+-1",
            "1f",
            "1d",
            "0x1p",
            "abc",
        ] {
            assert_eq!(parse(not_a_number), Ok(None), "{not_a_number:?}");
        }
        // The form NiFi lets through and Java cannot read.
        assert!(parse("0x.8").is_err());
    }

    #[test]
    fn hexadecimal_decimals_round_as_java_does() {
        let d = |t: &str| parse(t).unwrap().unwrap().decimal();
        // 53 significant bits exactly, then one more: ties go to even.
        assert_eq!(d("0x1.fffffffffffffp0"), 2.0 - f64::EPSILON);
        assert_eq!(d("0x1.00000000000008p0"), 1.0); // tie, even stays
        assert_eq!(d("0x1.00000000000018p0"), 1.0 + 2.0 * f64::EPSILON); // tie, odd rounds up
        assert_eq!(
            d("0x1.000000000000080000000000000000001p0"),
            1.0 + f64::EPSILON
        );
        assert_eq!(d("0x1p-1074"), 5e-324);
        assert_eq!(d("0x1p-1075"), 0.0); // tie with zero: even
        assert_eq!(d("0x1.8p-1075"), 5e-324);
        assert_eq!(d("0x1p1023"), 2f64.powi(1023));
        assert_eq!(d("0x1p1024"), f64::INFINITY);
        assert_eq!(d("0x1p-99999999999"), 0.0);
        assert_eq!(
            d("0xFEDCBA9876543210.0123456789ABCDEFp123"),
            f64::from_bits(0x4b9f_db97_530e_ca86)
        );
    }

    #[test]
    fn radixes_as_java_long() {
        assert_eq!(to_radix(255, 16), "ff");
        assert_eq!(to_radix(-255, 16), "-ff");
        assert_eq!(to_radix(255, 36), "73");
        assert_eq!(to_radix(0, 2), "0");
        assert_eq!(to_radix(i64::MIN, 2), format!("-1{}", "0".repeat(63)));
        assert_eq!(to_radix(255, 99), "255");
        assert_eq!(from_radix("ABCDEF", 16), Some(0xABCDEF));
        assert_eq!(from_radix("123", 4), Some(27));
        assert_eq!(from_radix("-ff", 16), Some(-255));
        assert_eq!(from_radix("+z", 36), Some(35));
        assert_eq!(from_radix("-8000000000000000", 16), Some(i64::MIN));
        for bad in ["", "-", "12", "+-1", "0x1"] {
            assert_eq!(from_radix(bad, 2), None, "{bad:?}");
        }
        assert_eq!(from_radix("1", 37), None);
    }

    proptest::proptest! {
        /// Any double written as Java writes it reads back as itself.
        #[test]
        fn java_text_reads_back(bits in proptest::prelude::any::<u64>()) {
            let x = f64::from_bits(bits);
            let text = java(x);
            match parse(&text).unwrap() {
                Some(Number::Decimal(y)) => proptest::prop_assert!(
                    y.to_bits() == x.to_bits() || (x.is_nan() && y.is_nan()), "{text}"
                ),
                other => proptest::prop_assert!(false, "{text} read as {other:?}"),
            }
        }

        /// The layout is Java's: plain from 10^-3 to below 10^7, scientific outside, always a
        /// fraction digit, and no digit more than needed.
        #[test]
        fn java_text_has_java_layout(x in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL) {
            let text = java(x);
            let a = x.abs();
            let scientific = text.contains('E');
            proptest::prop_assert_eq!(scientific, !(1e-3..1e7).contains(&a), "{}", text);
            let mantissa = text.split('E').next().unwrap();
            let (_, frac) = mantissa.split_once('.').expect("a fraction");
            proptest::prop_assert!(!frac.is_empty());
            proptest::prop_assert!(frac == "0" || !frac.ends_with('0'), "{}", text);
        }

        /// A whole number read from its text, decimal or hex, is itself.
        #[test]
        fn whole_text_reads_back(n in proptest::prelude::any::<i64>()) {
            proptest::prop_assert_eq!(parse(&n.to_string()), Ok(Some(Number::Whole(n))));
            let hex = if n < 0 {
                format!("-0x{:x}", n.unsigned_abs())
            } else {
                format!("0x{n:X}")
            };
            proptest::prop_assert_eq!(parse(&hex), Ok(Some(Number::Whole(n))));
            proptest::prop_assert_eq!(from_radix(&to_radix(n, 7), 7), Some(n));
        }

        /// A hexadecimal decimal of any double's exact bits reads back as that double.
        #[test]
        fn hex_text_reads_back(x in proptest::num::f64::POSITIVE | proptest::num::f64::NORMAL) {
            let (mantissa, exponent) = if x.is_subnormal() {
                (x.to_bits() & ((1 << 52) - 1), -1074)
            } else {
                let bits = x.to_bits();
                ((bits & ((1 << 52) - 1)) | (1 << 52), ((bits >> 52) & 0x7ff) as i64 - 1075)
            };
            let text = format!("0x{mantissa:X}p{exponent}");
            let sign = if x < 0.0 { -1.0 } else { 1.0 };
            proptest::prop_assert_eq!(parse(&text).unwrap().map(|n| sign * n.decimal()), Some(x));
        }

        /// Any text at all reads without a panic.
        #[test]
        fn any_text_reads_without_panic(t in "[-+0-9xXpPeE.a-fA-F ]{0,24}") {
            let _ = parse(&t);
        }
    }
}
