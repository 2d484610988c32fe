//! Reading and showing the values of arguments: durations, signals, numbers of permits, names.
//! Each reader is a clap value parser: its error says what is wrong with the value, which clap
//! quotes along with the option.

use std::time::Duration;

/// Longest duration accepted: the library's 10-year cap.
const MAX: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// `500ms`, `30s`, `1.5s`, `5m`, `1h`; a bare number is seconds.
pub fn duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err("not a duration: use a number with ms, s, m or h (500ms, 30s)".into());
        }
    };
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or("not a duration: use a number with ms, s, m or h (500ms, 30s, 5m)")?;
    let secs = value * scale;
    if secs > MAX.as_secs_f64() {
        return Err("too long: at most 10 years".into());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A signal by name (`TERM`, `SIGTERM`, case-insensitive) or number.
pub fn signal(text: &str) -> Result<i32, String> {
    let upper = text.trim().to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let known = [
        ("HUP", libc::SIGHUP),
        ("INT", libc::SIGINT),
        ("QUIT", libc::SIGQUIT),
        ("KILL", libc::SIGKILL),
        ("USR1", libc::SIGUSR1),
        ("USR2", libc::SIGUSR2),
        ("ALRM", libc::SIGALRM),
        ("TERM", libc::SIGTERM),
    ];
    if let Some((_, n)) = known.iter().find(|(k, _)| *k == name) {
        return Ok(*n);
    }
    match name.parse::<i32>() {
        Ok(n) if (1..=64).contains(&n) && n != libc::SIGSTOP => Ok(n),
        _ => Err(
            "not a signal to end a command with: use TERM, INT, HUP, QUIT, KILL, USR1, \
                  USR2, ALRM or a number"
                .into(),
        ),
    }
}

/// A number of permits: 1 to [`redquorum::MAX_PERMITS`].
pub fn permits(text: &str) -> Result<u32, String> {
    let max = redquorum::MAX_PERMITS;
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| format!("give a number from 1 to {max}"))
}

/// A name that must not be empty: a resource, an election, a token.
pub fn name(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("empty".into());
    }
    Ok(text.to_owned())
}

/// The name of signal `n` for messages.
pub fn signal_name(n: i32) -> String {
    signal_hook::low_level::signal_name(n)
        .map(str::to_owned)
        .unwrap_or_else(|| format!("signal {n}"))
}

/// `Duration` as a short text: `1.5s`, `250ms`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(duration("7"), Ok(Duration::from_secs(7)));
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        for bad in [
            "",
            "s",
            "-1s",
            "1d",
            "1.2.3s",
            "abc",
            "1e3s",
            "99999999999h",
        ] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn signals_by_name_or_number() {
        assert_eq!(signal("TERM"), Ok(libc::SIGTERM));
        assert_eq!(signal("sigint"), Ok(libc::SIGINT));
        assert_eq!(signal("9"), Ok(9));
        assert!(signal("STOP").is_err());
        assert!(signal("0").is_err());
        assert!(signal("nope").is_err());
    }

    #[test]
    fn permits_are_one_to_the_maximum() {
        assert_eq!(permits("1"), Ok(1));
        assert_eq!(permits("1024"), Ok(redquorum::MAX_PERMITS));
        for bad in ["0", "1025", "two", "", "-1"] {
            assert!(permits(bad).is_err(), "{bad}");
        }
    }
}
