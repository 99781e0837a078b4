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

/// A label key: an optional DNS-1123 subdomain prefix and `/`, then a name of at most 63
/// alphanumerics, `-`, `_`, `.`, starting and ending with an alphanumeric.
pub fn is_label_key(key: &str) -> bool {
    let (prefix, name) = key.rsplit_once('/').map_or((None, key), |(p, n)| (Some(p), n));
    prefix.is_none_or(is_dns1123_subdomain) && !name.is_empty() && is_label_value(name)
}

/// A label value: empty, or at most 63 alphanumerics, `-`, `_`, `.`, starting and ending with
/// an alphanumeric.
pub fn is_label_value(value: &str) -> bool {
    let edge = |b: Option<u8>| b.is_none_or(|b| b.is_ascii_alphanumeric());
    value.len() <= MAX_LABEL_LEN
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && edge(value.bytes().next())
        && edge(value.bytes().last())
}

/// Joins `parts` with `-` into a name of at most `max` characters. A name that fits is returned
/// as is; a longer one is cut and ends in `-` plus 8 hex characters of a stable hash of the
/// whole name, so distinct long names stay distinct and the result never changes between runs.
pub fn derived_name(parts: &[&str], max: usize) -> String {
    let full = parts.join("-");
    if full.len() <= max { full } else { hashed(&full, max) }
}

/// The name of the object of service `service` of ServiceSet `service_set`:
/// `<service_set>.<service>`, of at most `max` characters. Distinct pairs get distinct names
/// (joined with `-`, `a-b` + `c` and `a` + `b-c` would not): a service name without a dot puts the
/// ServiceSet's name before the last dot. A name with a dotted service, or too long, is cut and
/// ends in a stable hash of the pair, as in [`derived_name`].
pub fn service_object_name(service_set: &str, service: &str, max: usize) -> String {
    let full = format!("{service_set}.{service}");
    if full.len() <= max && !service.contains('.') { full } else { hashed(&full, max) }
}

/// `full` cut to leave room for `-` and 8 hex characters of its hash (on a character boundary,
/// no `-` or `.` left before the hash).
fn hashed(full: &str, max: usize) -> String {
    let hash = format!("{:08x}", fnv1a32(full.as_bytes()));
    let mut keep = max.saturating_sub(hash.len() + 1).min(full.len());
    while !full.is_char_boundary(keep) {
        keep -= 1;
    }
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
    fn label_keys_and_values_follow_kubernetes() {
        for good in ["app", "app.kubernetes.io/name", "k0rdent.mirantis.com/service", "a_b.c-d"] {
            assert!(is_label_key(good), "{good}");
        }
        for bad in ["", "-app", "app-", "Example.com/app", "a/b/c", "app.kubernetes.io/", &"a".repeat(64)] {
            assert!(!is_label_key(bad), "{bad}");
        }
        for good in ["", "v1.2.3", "prod_eu-1", &"a".repeat(63)] {
            assert!(is_label_value(good), "{good}");
        }
        for bad in ["-v1", "v1.", "a b", &"a".repeat(64)] {
            assert!(!is_label_value(bad), "{bad}");
        }
    }

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
    fn service_object_names_never_collide_and_stay_within_the_limit() {
        assert_eq!(service_object_name("prod-eu-1", "ingress-nginx", 63), "prod-eu-1.ingress-nginx");
        assert_ne!(service_object_name("a-b", "c", 63), service_object_name("a", "b-c", 63));
        assert_ne!(service_object_name("a.b", "c.d", 63), service_object_name("a.b.c", "d", 63));
        let long = service_object_name(&"x".repeat(253), "ingress", 63);
        assert!(long.len() == 63 && is_dns1123_subdomain(&long), "{long}");
        assert_ne!(long, service_object_name(&"x".repeat(252), "ingress", 63));
    }

    #[test]
    fn shortening_never_splits_a_character() {
        // The cut falls inside `é` (bytes 53 and 54): the name is cut before it.
        let full = format!("{}ébb-service", "a".repeat(53));
        let name = derived_name(&[&format!("{}ébb", "a".repeat(53)), "service"], 63);
        assert_eq!(name, format!("{}-{:08x}", "a".repeat(53), fnv1a32(full.as_bytes())));
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
