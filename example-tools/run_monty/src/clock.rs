//! `datetime.now()` and `date.today()` from the instance's clock (UTC,
//! or at the offset of the timezone given); the script's other OS calls
//! (files, environment) have nothing behind them.

use std::time::{SystemTime, UNIX_EPOCH};

use monty_types::{
    ExcType, ExtFunctionResult, MontyDate, MontyDateTime, MontyException, MontyObject,
    OsFunctionCall,
};

/// The answer to an OS call of the script.
pub fn answer(call: &OsFunctionCall) -> ExtFunctionResult {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    match call {
        OsFunctionCall::DateToday => {
            let (year, month, day) = civil(now.as_secs() as i64 / 86_400);
            ExtFunctionResult::Return(MontyObject::Date(MontyDate { year, month, day }))
        }
        OsFunctionCall::DateTimeNow(zone) => {
            let offset = zone.as_ref().map_or(0, |zone| zone.offset_seconds);
            let seconds = now.as_secs() as i64 + i64::from(offset);
            let (year, month, day) = civil(seconds.div_euclid(86_400));
            let of_day = seconds.rem_euclid(86_400);
            ExtFunctionResult::Return(MontyObject::DateTime(MontyDateTime {
                year,
                month,
                day,
                hour: (of_day / 3600) as u8,
                minute: (of_day / 60 % 60) as u8,
                second: (of_day % 60) as u8,
                microsecond: now.subsec_micros(),
                offset_seconds: zone.as_ref().map(|zone| zone.offset_seconds),
                timezone_name: zone.as_ref().and_then(|zone| zone.name.clone()),
            }))
        }
        other => ExtFunctionResult::Error(MontyException::new(
            ExcType::PermissionError,
            Some(format!(
                "{} is not available to a script: it has no files or environment; pass data \
                 in and out through tool calls",
                other.name()
            )),
        )),
    }
}

/// The Gregorian (year, month, day) of `days` since 1970-01-01.
fn civil(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year as i32, month, day)
}

#[cfg(test)]
mod tests {
    use super::civil;

    #[test]
    fn days_become_dates() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(19_723), (2024, 1, 1));
        assert_eq!(civil(20_792), (2026, 12, 5));
        assert_eq!(civil(-1), (1969, 12, 31));
    }
}
