//! Numbers and dates as the table prints them.

/// `1234567.8` → `1,234,568`; below 100, one decimal.
pub fn fmt(x: Option<f64>) -> String {
    let Some(x) = x else {
        return "n/a".into();
    };
    if !x.is_finite() {
        return "n/a".into();
    }
    if x.abs() < 100.0 {
        return format!("{x:.1}");
    }
    thousands(x.round() as i64)
}

pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

/// `YYYY-MM-DD HH:MM` in UTC.
pub fn utc_minutes(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_dates_are_formatted() {
        assert_eq!(fmt(Some(1_234_567.6)), "1,234,568");
        assert_eq!(fmt(Some(99.94)), "99.9");
        assert_eq!(fmt(None), "n/a");
        assert_eq!(thousands(-1000), "-1,000");
        assert_eq!(thousands(999), "999");
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_764_446_940);
        assert_eq!(utc_minutes(t), "2025-11-29 20:09");
        assert_eq!(utc_minutes(std::time::UNIX_EPOCH), "1970-01-01 00:00");
    }
}
