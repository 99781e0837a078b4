//! The duration format of Flux's `interval` and `timeout` fields.

/// Whether `s` is a duration Flux accepts: one or more `<number><unit>` parts, the number
/// an integer or decimal and the unit `ms`, `s`, `m` or `h`, e.g. `10m`, `1h30m`, `1.5s`
/// (the CRD pattern `^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`).
pub fn is_valid(s: &str) -> bool {
    let mut rest = s;
    while !rest.is_empty() {
        match part_len(rest) {
            Some(len) => rest = &rest[len..],
            None => return false,
        }
    }
    !s.is_empty()
}

/// The length of the `<number><unit>` part `s` starts with, if it starts with one.
fn part_len(s: &str) -> Option<usize> {
    let digits = |from: usize| s[from..].bytes().take_while(u8::is_ascii_digit).count();
    let mut len = digits(0);
    if len == 0 {
        return None;
    }
    if s[len..].starts_with('.') {
        let fraction = digits(len + 1);
        if fraction == 0 {
            return None;
        }
        len += 1 + fraction;
    }
    let unit = ["ms", "s", "m", "h"].into_iter().find(|u| s[len..].starts_with(u))?;
    Some(len + unit.len())
}

#[cfg(test)]
mod tests {
    use super::is_valid;

    #[test]
    fn accepts_flux_durations() {
        for d in ["10m", "0s", "1h30m", "1.5s", "500ms", "1h0m0s", "2h45m30s100ms", "10.25h"] {
            assert!(is_valid(d), "{d}");
        }
    }

    #[test]
    fn rejects_everything_else() {
        for d in ["", "5x", "10", "m", "1.m", ".5s", "1d", "-1m", "1 m", "1m ", "1M", "1ms5", "1e3s", "1mss"] {
            assert!(!is_valid(d), "{d}");
        }
    }
}
