//! Kubernetes name rules and stable shortening of derived names.

/// Longest DNS-1123 label (names of most objects, label values).
pub const MAX_LABEL_LEN: usize = 63;
/// Longest DNS-1123 subdomain.
pub const MAX_SUBDOMAIN_LEN: usize = 253;

/// Whether `s` is a DNS-1123 label: lower-case alphanumerics and `-`, starting and ending with
/// an alphanumeric, at most 63 characters.
pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_LABEL_LEN
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Whether `s` is a DNS-1123 subdomain: dot-separated DNS-1123 labels, at most 253 characters.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_SUBDOMAIN_LEN && s.split('.').all(is_dns1123_label)
}

/// Joins `parts` with `-` into a name of at most `max` characters. A name that fits is returned
/// as is; a longer one is cut and ends in `-` plus 8 hex characters of a stable hash of the
/// whole name, so distinct long names stay distinct and the result never changes between runs.
pub fn derived_name(parts: &[&str], max: usize) -> String {
    let full = parts.join("-");
    if full.len() <= max {
        return full;
    }
    let hash = format!("{:08x}", fnv1a32(full.as_bytes()));
    let keep = max.saturating_sub(hash.len() + 1);
    let prefix = full[..keep].trim_end_matches(['-', '.']);
    format!("{prefix}-{hash}")
}

/// 32-bit FNV-1a: tiny, dependency-free and stable across platforms and versions.
fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_kept() {
        assert_eq!(derived_name(&["prod-eu-1", "ingress"], 63), "prod-eu-1-ingress");
    }

    #[test]
    fn long_names_are_shortened_stably_and_distinctly() {
        let long = "a".repeat(60);
        let one = derived_name(&[&long, "ingress-nginx"], 63);
        let two = derived_name(&[&long, "cert-manager"], 63);
        assert_eq!(one.len(), 63);
        assert!(is_dns1123_label(&one), "{one}");
        assert_ne!(one, two);
        assert_eq!(one, derived_name(&[&long, "ingress-nginx"], 63));
        assert_eq!(one, format!("{}-{:08x}", &long[..54], fnv1a32(format!("{long}-ingress-nginx").as_bytes())));
    }

    #[test]
    fn shortening_never_leaves_a_dash_before_the_hash() {
        let name = derived_name(&[&"a".repeat(53), "-b-c-d-e-f-g-h-i-j"], 63);
        assert!(is_dns1123_label(&name), "{name}");
        assert!(!name.contains("--"), "{name}");
    }

    #[test]
    fn dns_rules() {
        assert!(is_dns1123_label("a-1"));
        assert!(!is_dns1123_label("A"));
        assert!(!is_dns1123_label("-a"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_subdomain("a.b-c"));
        assert!(!is_dns1123_subdomain("a..b"));
    }
}
