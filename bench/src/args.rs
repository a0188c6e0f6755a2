//! Parsers of option values that several subcommands share.

use secrecy::SecretString;

/// A secret option's value: not empty.
pub fn secret(s: &str) -> Result<SecretString, String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    Ok(SecretString::from(s))
}

pub fn probability(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err("must be a number from 0 to 1".into()),
    }
}

pub fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err("must be a number above 0".into()),
    }
}

/// `FROM..TO`, two integers with `FROM <= TO`.
pub fn parse_window(text: &str) -> Result<(i64, i64), String> {
    let (from, to) = text
        .split_once("..")
        .ok_or_else(|| format!("{text:?} is not FROM..TO"))?;
    let n = |s: &str| s.parse::<i64>().map_err(|e| format!("{s:?}: {e}"));
    let (from, to) = (n(from)?, n(to)?);
    if from > to {
        return Err(format!("{from} is after {to}"));
    }
    Ok((from, to))
}
