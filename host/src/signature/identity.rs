//! Which identities an operator accepts as signers of a plugin, as Kubewarden's `genericIssuer`
//! rules say it: an OIDC issuer (exact), a subject (exact, or a URL prefix that always ends in
//! `/`, so `https://github.com/acme` never matches `https://github.com/acme-evil/...`), and
//! annotations the signature must carry; `allOf` every rule, `anyOf` at least a minimum of them.
//! Pure: what is matched are signers whose certificates were verified already.

use std::collections::BTreeMap;

/// A signer a verified keyless signature proves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signer {
    /// The certificate's subject alternative names (URIs and emails).
    pub subjects: Vec<String>,
    /// The OIDC issuer the certificate names, if it names one.
    pub issuer: Option<String>,
    /// The annotations of the signed payload (`cosign sign -a`).
    pub annotations: BTreeMap<String, String>,
    /// When it signed, Unix seconds.
    pub signed_at: i64,
}

/// How a rule matches a subject.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// The subject, exactly.
    Equal(String),
    /// Any subject under this URL; a `/` is added when it does not end in one.
    UrlPrefix(String),
}

/// One accepted identity, named by where it is listed (e.g. `keyless.allOf[0]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Where it is listed.
    pub name: String,
    /// The OIDC issuer, exactly.
    pub issuer: String,
    /// The subject.
    pub subject: Subject,
    /// Annotations the signed payload must carry, with these values.
    pub annotations: BTreeMap<String, String>,
}

/// The rules of `keyless`: all of `all_of`, and at least `minimum` of `any_of`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// Each must be matched.
    pub all_of: Vec<Rule>,
    /// At least `minimum` of these must be matched.
    pub any_of: Vec<Rule>,
    /// How many of `any_of`.
    pub minimum: usize,
}

impl Rule {
    /// The subject of `signer` this rule accepts, if it accepts one.
    pub fn accepts<'s>(&self, signer: &'s Signer) -> Option<&'s str> {
        if signer.issuer.as_deref() != Some(self.issuer.as_str()) {
            return None;
        }
        if self.annotations.iter().any(|(k, v)| signer.annotations.get(k) != Some(v)) {
            return None;
        }
        signer.subjects.iter().map(String::as_str).find(|subject| match &self.subject {
            Subject::Equal(equal) => subject == equal,
            Subject::UrlPrefix(prefix) if prefix.ends_with('/') => subject.starts_with(prefix.as_str()),
            Subject::UrlPrefix(prefix) => subject.starts_with(&format!("{prefix}/")),
        })
    }

    /// The first of `signers` it accepts, described.
    fn matched_by(&self, signers: &[Signer]) -> Option<String> {
        signers.iter().find_map(|signer| {
            self.accepts(signer).map(|subject| {
                let at = super::trust_root::shown(signer.signed_at);
                format!("{} matched by {subject} (issuer {}), signed at {at}", self.name, self.issuer)
            })
        })
    }
}

impl Rules {
    /// Which rules `signers` satisfy, described, when they satisfy all of `all_of` and
    /// `minimum` of `any_of`; otherwise which do not hold.
    pub fn evaluate(&self, signers: &[Signer]) -> Result<Vec<String>, String> {
        let (mut matched, mut missing) = (Vec::new(), Vec::new());
        for rule in &self.all_of {
            match rule.matched_by(signers) {
                Some(m) => matched.push(m),
                None => missing.push(format!("{} is matched by no signature", rule.name)),
            }
        }
        let any: Vec<String> = self.any_of.iter().filter_map(|r| r.matched_by(signers)).collect();
        if !self.any_of.is_empty() && any.len() < self.minimum {
            missing.push(format!(
                "keyless.anyOf: {} of its {} rules matched, {} needed",
                any.len(),
                self.any_of.len(),
                self.minimum
            ));
        }
        matched.extend(any);
        if missing.is_empty() { Ok(matched) } else { Err(missing.join("; ")) }
    }
}

/// A signer in words: its subjects and issuer.
pub fn describe(signer: &Signer) -> String {
    format!("subject {} issuer {}", signer.subjects.join(", "), signer.issuer.as_deref().unwrap_or("(none)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GITHUB: &str = "https://token.actions.githubusercontent.com";

    fn signer(subject: &str, issuer: &str) -> Signer {
        Signer {
            subjects: vec![subject.into()],
            issuer: Some(issuer.into()),
            annotations: BTreeMap::from([("env".to_string(), "prod".to_string())]),
            signed_at: 1_800_000_000,
        }
    }

    fn rule(name: &str, subject: Subject, issuer: &str) -> Rule {
        Rule { name: name.into(), issuer: issuer.into(), subject, annotations: BTreeMap::new() }
    }

    #[test]
    fn a_subject_is_equal_or_under_a_prefix_that_ends_in_a_slash() {
        let ci = signer("https://github.com/acme/plugins/.github/workflows/release.yaml@refs/tags/v1", GITHUB);
        let evil = signer("https://github.com/acme-evil/plugins/.github/workflows/release.yaml@refs/tags/v1", GITHUB);
        let prefix = rule("r", Subject::UrlPrefix("https://github.com/acme".into()), GITHUB);
        assert!(prefix.accepts(&ci).is_some());
        assert_eq!(prefix.accepts(&evil), None, "a prefix without its / does not reach a sibling organisation");
        let with_slash = rule("r", Subject::UrlPrefix("https://github.com/acme/".into()), GITHUB);
        assert!(with_slash.accepts(&ci).is_some() && with_slash.accepts(&evil).is_none());
        let equal = rule("r", Subject::Equal(ci.subjects[0].clone()), GITHUB);
        assert!(equal.accepts(&ci).is_some());
        assert_eq!(rule("r", Subject::Equal("https://github.com/acme".into()), GITHUB).accepts(&ci), None);
    }

    #[test]
    fn the_issuer_is_exact_and_annotations_must_all_be_carried() {
        let ci = signer("ci@acme.example", "https://dex.acme.example");
        let base = rule("r", Subject::Equal("ci@acme.example".into()), "https://dex.acme.example");
        assert!(base.accepts(&ci).is_some());
        assert_eq!(rule("r", Subject::Equal("ci@acme.example".into()), "https://dex.acme.example/").accepts(&ci), None);
        let unnamed = Signer { issuer: None, ..ci.clone() };
        assert_eq!(base.accepts(&unnamed), None, "a certificate naming no issuer matches no rule");
        let wants = |k: &str, v: &str| Rule { annotations: BTreeMap::from([(k.into(), v.into())]), ..base.clone() };
        assert!(wants("env", "prod").accepts(&ci).is_some());
        assert_eq!(wants("env", "dev").accepts(&ci), None);
        assert_eq!(wants("team", "prod").accepts(&ci), None);
    }

    #[test]
    fn all_of_needs_each_rule_and_any_of_its_minimum() {
        let (a, b) = (signer("https://ci.example/a", GITHUB), signer("https://ci.example/b", GITHUB));
        let r = |i: usize, s: &str| rule(&format!("keyless.allOf[{i}]"), Subject::Equal(s.into()), GITHUB);
        let all =
            Rules { all_of: vec![r(0, "https://ci.example/a"), r(1, "https://ci.example/b")], ..Rules::default() };
        assert_eq!(all.evaluate(&[a.clone(), b.clone()]).unwrap().len(), 2);
        assert_eq!(all.evaluate(std::slice::from_ref(&a)).unwrap_err(), "keyless.allOf[1] is matched by no signature");

        let any_rule =
            |i: usize, s: &str| rule(&format!("keyless.anyOf.signatures[{i}]"), Subject::Equal(s.into()), GITHUB);
        let any = |minimum| Rules {
            any_of: vec![
                any_rule(0, "https://ci.example/a"),
                any_rule(1, "https://ci.example/b"),
                any_rule(2, "https://ci.example/c"),
            ],
            minimum,
            ..Rules::default()
        };
        assert!(any(1).evaluate(std::slice::from_ref(&b)).is_ok());
        assert_eq!(
            any(2).evaluate(std::slice::from_ref(&b)).unwrap_err(),
            "keyless.anyOf: 1 of its 3 rules matched, 2 needed"
        );
        let both = any(2).evaluate(&[a.clone(), b.clone()]).unwrap();
        assert!(both[0].starts_with("keyless.anyOf.signatures[0] matched by https://ci.example/a (issuer"), "{both:?}");
        assert_eq!(any(1).evaluate(&[]).unwrap_err(), "keyless.anyOf: 0 of its 3 rules matched, 1 needed");
    }
}
