//! Durations and sizes as NiFi writes them: a number and a unit (`200 ms`, `1 GB`).

use std::time::Duration;

/// Why a duration or size is not one NiFi would read. Its text is the validation report's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// The unit of a duration is not one of the known ones.
    #[error("unknown duration unit `{unit}` in `{text}` (use ms, s, sec, min or h)")]
    DurationUnit {
        /// The unit as written.
        unit: String,
        /// The whole value.
        text: String,
    },
    /// The unit of a size is not one of the known ones.
    #[error("unknown size unit `{unit}` in `{text}` (use B, KB, MB or GB)")]
    SizeUnit {
        /// The unit as written.
        unit: String,
        /// The whole value.
        text: String,
    },
    /// The value does not start with a number.
    #[error("`{0}` does not start with a number")]
    NoNumber(String),
    /// The value is a number without a unit.
    #[error("`{0}` has no unit")]
    NoUnit(String),
}

/// Parses a NiFi duration: a non-negative number and one of `ms`, `millis`, `s`, `sec`, `secs`,
/// `second(s)`, `min`, `mins`, `minute(s)`, `h`, `hr`, `hour(s)`, `d`, `day(s)`.
///
/// # Errors
/// [`UnitError`], naming what is wrong, for the validation report.
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let (number, unit) = split_number(text)?;
    let millis_per_unit = match unit.to_ascii_lowercase().as_str() {
        "ns" | "nanos" => 1e-6,
        "us" | "micros" => 1e-3,
        "ms" | "millis" | "milliseconds" => 1.0,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000.0,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000.0,
        "d" | "day" | "days" => 86_400_000.0,
        other => {
            return Err(UnitError::DurationUnit {
                unit: other.to_string(),
                text: text.to_string(),
            });
        }
    };
    Ok(Duration::from_secs_f64(number * millis_per_unit / 1_000.0))
}

/// Parses a NiFi data size: a non-negative number and one of `B`, `KB`, `MB`, `GB`, `TB`
/// (powers of 1024, as NiFi counts them).
///
/// # Errors
/// [`UnitError`], naming what is wrong, for the validation report.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let (number, unit) = split_number(text)?;
    let factor: u64 = match unit.to_ascii_uppercase().as_str() {
        "B" | "BYTES" => 1,
        "KB" | "KIB" => 1 << 10,
        "MB" | "MIB" => 1 << 20,
        "GB" | "GIB" => 1 << 30,
        "TB" | "TIB" => 1 << 40,
        other => {
            return Err(UnitError::SizeUnit {
                unit: other.to_string(),
                text: text.to_string(),
            });
        }
    };
    Ok((number * factor as f64) as u64)
}

fn split_number(text: &str) -> Result<(f64, &str), UnitError> {
    let text = text.trim();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(end);
    let number: f64 = digits
        .parse()
        .map_err(|_| UnitError::NoNumber(text.to_string()))?;
    let unit = unit.trim();
    if unit.is_empty() {
        return Err(UnitError::NoUnit(text.to_string()));
    }
    Ok((number, unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes() {
        assert_eq!(
            parse_duration("200 ms").unwrap(),
            Duration::from_millis(200)
        );
        assert_eq!(parse_duration("1 min").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("30 sec").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("0 s").unwrap(), Duration::ZERO);
        assert!(
            parse_duration("5 parsecs")
                .unwrap_err()
                .to_string()
                .contains("unit")
        );
        assert!(parse_duration("fast").is_err());
        assert_eq!(parse_size("1 GB").unwrap(), 1 << 30);
        assert_eq!(parse_size("10 KB").unwrap(), 10 << 10);
        assert!(parse_size("12").is_err());
    }
}
