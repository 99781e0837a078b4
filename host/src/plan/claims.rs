//! Arbitration of claims across ServiceSets. A plugin states what each service takes on its
//! target exclusively (e.g. a Helm release); when services of several ServiceSets claim the same
//! thing, one wins: the higher `spec.provider.config.priority` (default 100, as kcm), then the
//! ServiceSet created first, then namespace, name and service name, so that the outcome never
//! depends on the order in which ServiceSets were seen. Losers apply nothing for that service.

use crate::k0rdent::{NamespacedName, ServiceSet};
use k8s_openapi::jiff::Timestamp;
use ksm_plugin_sdk::contract::Claim;
use sha2::{Digest, Sha256};
use std::borrow::Borrow;
use std::cmp::Reverse;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

/// kcm's default priority of a ServiceSet's services.
pub const DEFAULT_PRIORITY: i64 = 100;

/// A service and what it claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceClaims {
    /// The service's name.
    pub service: String,
    /// What it claims on its target.
    pub claims: Vec<Claim>,
}

/// A ServiceSet as a contender for claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contender {
    /// Namespace and name.
    pub key: NamespacedName,
    /// `spec.provider.config.priority`, or [`DEFAULT_PRIORITY`].
    pub priority: i64,
    /// `metadata.creationTimestamp` (none sorts last).
    pub created: Option<Timestamp>,
}

impl Contender {
    /// The contender for `service_set`.
    pub fn of(service_set: &ServiceSet) -> Self {
        let priority =
            service_set.spec.provider.config_field("priority").and_then(|p| p.as_i64()).unwrap_or(DEFAULT_PRIORITY);
        Self {
            key: NamespacedName::of(service_set),
            priority,
            created: service_set.metadata.creation_timestamp.as_ref().map(|t| t.0),
        }
    }
}

/// `spec.provider.config.stopOnConflict`: once a service loses a claim, the services after it
/// (in spec order) apply nothing either, as kcm's `stopOnConflict` stops a deployment at its
/// first conflict.
pub fn stops_on_conflict(service_set: &ServiceSet) -> bool {
    service_set.spec.provider.config_field("stopOnConflict").and_then(|s| s.as_bool()).unwrap_or(false)
}

/// Why a service may not apply: the claim it lost, and who holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loss {
    /// The contested claim.
    pub claim: Claim,
    /// The winning ServiceSet.
    pub winner: Contender,
    /// The winning service.
    pub winner_service: String,
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "conflicts with {} service {:?} (priority {}) over {}",
            self.winner.key, self.winner_service, self.winner.priority, self.claim
        )
    }
}

/// The outcome of arbitration for one ServiceSet's services.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Arbitration {
    /// Services that lose a claim: they apply nothing and are Failed.
    pub losses: BTreeMap<String, Loss>,
    /// Services that win a claim a loser still has objects for: they wait (Pending) until the
    /// loser's objects are gone, so two CD objects never fight over one release. The message
    /// names who they wait for.
    pub waiting: BTreeMap<String, String>,
}

/// Arbitrates for ServiceSet `key` over `index`; `has_objects(service_set, service)` tells
/// whether a service of another ServiceSet still has live objects.
pub fn arbitrate(
    index: &ClaimIndex,
    key: &NamespacedName,
    has_objects: impl Fn(&NamespacedName, &str) -> bool,
) -> Arbitration {
    let losses = index.losses(key);
    let mut waiting = BTreeMap::new();
    for (claim, winner, loser) in index.beaten(key) {
        if !losses.contains_key(&*winner.service) && has_objects(&loser.contender.key, &loser.service) {
            let key = &loser.contender.key;
            waiting.entry(winner.service.to_string()).or_insert_with(|| {
                format!("waiting for {key} service {:?} to remove its objects for {claim}", loser.service)
            });
        }
    }
    Arbitration { losses, waiting }
}

#[derive(Clone, Debug)]
struct Holder {
    /// Shared by every claim of the ServiceSet.
    contender: Arc<Contender>,
    service: Box<str>,
}

impl Holder {
    /// Smaller wins.
    fn rank(&self) -> impl Ord + '_ {
        let created = (self.contender.created.is_none(), self.contender.created);
        (Reverse(self.contender.priority), created, &self.contender.key, &self.service)
    }
}

/// A claim as the index keys it: the first 128 bits of the SHA-256 of its four strings, each
/// after its length. The index holds a few claims per ServiceSet, for every ServiceSet, and
/// needs a claim's text only to name it in a conflict. The strings come from plugins and from
/// what ServiceSet editors write, so the digest is one no one can make two claims share (a
/// collision takes ~2^64 tries), not a hash one could steer into another tenant's claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ClaimDigest([u8; 16]);

impl ClaimDigest {
    fn of(claim: &Claim) -> Self {
        let mut hasher = Sha256::new();
        for part in [&claim.target, &claim.kind, &claim.namespace, &claim.name] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        let digest = hasher.finalize();
        Self(digest[..16].try_into().expect("SHA-256 has 32 bytes"))
    }
}

/// Who holds one claim. Nearly every claim has one holder: only a contested one keeps its text,
/// for the conflict's messages, and goes back to none when the contest ends.
#[derive(Debug)]
enum Holding {
    One(Holder),
    Contested(Box<Contest>),
}

#[derive(Debug)]
struct Contest {
    claim: Claim,
    holders: Vec<Holder>,
}

impl Holding {
    fn holders(&self) -> &[Holder] {
        match self {
            Holding::One(holder) => std::slice::from_ref(holder),
            Holding::Contested(contest) => &contest.holders,
        }
    }

    /// The claim and the holder that wins it (the lowest [`Holder::rank`]), when contested.
    fn contest(&self) -> Option<(&Claim, &Holder)> {
        let Holding::Contested(contest) = self else { return None };
        let winner = contest.holders.iter().min_by(|a, b| a.rank().cmp(&b.rank()));
        Some((&contest.claim, winner.expect("a contest has holders")))
    }

    /// Adds `holder` of `claim`.
    fn add(&mut self, claim: &Claim, holder: Holder) {
        match self {
            Holding::Contested(contest) => contest.holders.push(holder),
            Holding::One(first) => {
                let holders = vec![first.clone(), holder];
                *self = Holding::Contested(Box::new(Contest { claim: claim.clone(), holders }));
            }
        }
    }

    /// Removes `key`'s holders: `None` when none is left.
    fn without(self, key: &NamespacedName) -> Option<Self> {
        match self {
            Holding::One(holder) => (holder.contender.key != *key).then_some(Holding::One(holder)),
            Holding::Contested(mut contest) => {
                contest.holders.retain(|h| h.contender.key != *key);
                match contest.holders.len() {
                    0 => None,
                    1 => contest.holders.pop().map(Holding::One),
                    _ => Some(Holding::Contested(contest)),
                }
            }
        }
    }
}

/// A ServiceSet as the key of its claims: its contender, shared with its holders, so that its
/// name is stored once however many claims it holds.
#[derive(Debug)]
struct Claimant(Arc<Contender>);

impl Borrow<NamespacedName> for Claimant {
    fn borrow(&self) -> &NamespacedName {
        &self.0.key
    }
}

impl PartialEq for Claimant {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
    }
}

impl Eq for Claimant {}

impl Ord for Claimant {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.key.cmp(&other.0.key)
    }
}

impl PartialOrd for Claimant {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Every claim of the ServiceSets the host serves, and who holds it, by the claim's digest; each
/// ServiceSet's contender shared by its claims. A ServiceSet has a few claims: small sorted
/// `Vec`s rather than sets, which take a B-tree node each.
#[derive(Debug, Default)]
pub struct ClaimIndex {
    holders: BTreeMap<ClaimDigest, Holding>,
    claimed: BTreeMap<Claimant, Vec<ClaimDigest>>,
}

impl ClaimIndex {
    /// Records what `contender`'s services claim now (one [`ServiceClaims`] per service), replacing what
    /// it claimed before. Returns the other ServiceSets contending for any claim it held or
    /// holds: their outcome may have changed.
    pub fn record(&mut self, contender: &Contender, claims: &[ServiceClaims]) -> BTreeSet<NamespacedName> {
        let mut others = self.forget(&contender.key);
        let shared = Arc::new(contender.clone());
        let mut claimed = Vec::new();
        for ServiceClaims { service, claims: service_claims } in claims {
            for claim in service_claims {
                let digest = ClaimDigest::of(claim);
                let holder = Holder { contender: shared.clone(), service: service.as_str().into() };
                match self.holders.entry(digest) {
                    Entry::Vacant(vacant) => {
                        vacant.insert(Holding::One(holder));
                    }
                    Entry::Occupied(mut held) => {
                        others.extend(held.get().holders().iter().map(|h| h.contender.key.clone()));
                        held.get_mut().add(claim, holder);
                    }
                }
                if let Err(at) = claimed.binary_search(&digest) {
                    claimed.insert(at, digest);
                }
            }
        }
        if !claimed.is_empty() {
            claimed.shrink_to_fit();
            self.claimed.insert(Claimant(shared), claimed);
        }
        others.remove(&contender.key);
        others
    }

    /// Forgets a ServiceSet's claims (it is gone or no longer served). Returns the ServiceSets
    /// that contended for them.
    pub fn release(&mut self, key: &NamespacedName) -> BTreeSet<NamespacedName> {
        self.forget(key)
    }

    /// The services of ServiceSet `key` that lose a claim, each with one it loses (the same one
    /// each time: the first by digest).
    pub fn losses(&self, key: &NamespacedName) -> BTreeMap<String, Loss> {
        let mut losses = BTreeMap::new();
        for (claim, holders, winner) in self.contests_of(key) {
            for loser in holders.iter().filter(|h| h.contender.key == *key && h.rank() != winner.rank()) {
                losses.entry(loser.service.to_string()).or_insert_with(|| Loss {
                    claim: claim.clone(),
                    winner: Contender::clone(&winner.contender),
                    winner_service: winner.service.to_string(),
                });
            }
        }
        losses
    }

    /// For each claim a service of `key` wins, the other ServiceSets' holders it beats.
    fn beaten(&self, key: &NamespacedName) -> Vec<(&Claim, &Holder, &Holder)> {
        let mut beaten = Vec::new();
        for (claim, holders, winner) in self.contests_of(key) {
            if winner.contender.key == *key {
                beaten.extend(holders.iter().filter(|h| h.contender.key != *key).map(|h| (claim, winner, h)));
            }
        }
        beaten
    }

    /// The contested claims of `key`, each with its holders and winner.
    fn contests_of(&self, key: &NamespacedName) -> impl Iterator<Item = (&Claim, &[Holder], &Holder)> {
        let holdings = self.claimed.get(key).into_iter().flatten().map(|digest| &self.holders[digest]);
        holdings.filter_map(|holding| holding.contest().map(|(claim, winner)| (claim, holding.holders(), winner)))
    }

    /// Removes every claim of `key`; returns the other ServiceSets that held any of them.
    fn forget(&mut self, key: &NamespacedName) -> BTreeSet<NamespacedName> {
        let mut others = BTreeSet::new();
        for digest in self.claimed.remove(key).unwrap_or_default() {
            let Some(left) = self.holders.remove(&digest).and_then(|holding| holding.without(key)) else { continue };
            others.extend(left.holders().iter().map(|h| h.contender.key.clone()));
            self.holders.insert(digest, left);
        }
        others
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(name: &str) -> Claim {
        Claim {
            target: "team-a/prod-eu-1".into(),
            kind: "helm-release".into(),
            namespace: "ingress".into(),
            name: name.into(),
        }
    }

    fn contender(name: &str, priority: i64, created: i64) -> Contender {
        Contender {
            key: NamespacedName::new("team-a", name),
            priority,
            created: Some(Timestamp::from_second(created).unwrap()),
        }
    }

    fn claims(service: &str, claim: Claim) -> Vec<ServiceClaims> {
        vec![ServiceClaims { service: service.into(), claims: vec![claim] }]
    }

    fn losers(index: &ClaimIndex, names: &[&str]) -> Vec<String> {
        names
            .iter()
            .filter(|n| !index.losses(&NamespacedName::new("team-a", n.to_string())).is_empty())
            .map(|n| n.to_string())
            .collect()
    }

    #[test]
    fn higher_priority_wins_whoever_came_first() {
        let mut index = ClaimIndex::default();
        let (old, new) = (contender("old", 100, 1), contender("new", 200, 2));
        assert!(index.record(&old, &claims("ingress", release("ingress"))).is_empty());
        let touched = index.record(&new, &claims("ingress", release("ingress")));
        assert_eq!(touched, BTreeSet::from([old.key.clone()]), "the old holder must be told");
        assert_eq!(losers(&index, &["old", "new"]), ["old"]);
        let loss = &index.losses(&old.key)["ingress"];
        assert_eq!(
            loss.to_string(),
            r#"conflicts with team-a/new service "ingress" (priority 200) over helm-release ingress/ingress on team-a/prod-eu-1"#
        );
    }

    #[test]
    fn ties_go_to_the_older_then_to_the_name() {
        let mut index = ClaimIndex::default();
        index.record(&contender("b", 100, 2), &claims("x", release("r")));
        index.record(&contender("a", 100, 3), &claims("x", release("r")));
        assert_eq!(losers(&index, &["a", "b"]), ["a"], "created first wins the tie");

        let mut index = ClaimIndex::default();
        index.record(&contender("b", 100, 5), &claims("x", release("r")));
        index.record(&contender("a", 100, 5), &claims("x", release("r")));
        assert_eq!(losers(&index, &["a", "b"]), ["b"], "same second: the name decides");
    }

    #[test]
    fn three_way_one_winner_and_unrelated_claims_untouched() {
        let mut index = ClaimIndex::default();
        index.record(&contender("a", 50, 1), &claims("x", release("r")));
        index.record(&contender("b", 300, 2), &claims("x", release("r")));
        index.record(
            &contender("c", 200, 3),
            &[
                ServiceClaims { service: "x".into(), claims: vec![release("r")] },
                ServiceClaims { service: "y".into(), claims: vec![release("other")] },
            ],
        );
        assert_eq!(losers(&index, &["a", "b", "c"]), ["a", "c"]);
        let c = index.losses(&NamespacedName::new("team-a", "c"));
        assert_eq!(c.keys().collect::<Vec<_>>(), ["x"], "c's other service keeps its own release");
        assert_eq!(c["x"].winner.key.name, "b");
    }

    /// Two services of one ServiceSet claiming the same release: one loses to the other (the
    /// name decides), the ServiceSet lists the claim once, and releasing it leaves nothing.
    #[test]
    fn one_service_set_claiming_a_release_twice_loses_it_to_itself_and_releases_it_whole() {
        let mut index = ClaimIndex::default();
        let a = contender("a", 100, 1);
        let twice = [
            ServiceClaims { service: "y".into(), claims: vec![release("r"), release("s")] },
            ServiceClaims { service: "x".into(), claims: vec![release("r")] },
        ];
        assert!(index.record(&a, &twice).is_empty(), "no other ServiceSet to tell");
        assert_eq!(index.claimed[&a.key].len(), 2, "each claim listed once");
        let losses = index.losses(&a.key);
        assert_eq!(losses.keys().collect::<Vec<_>>(), ["y"]);
        assert_eq!(losses["y"].winner_service, "x");
        index.release(&a.key);
        assert!(index.holders.is_empty() && index.claimed.is_empty());
    }

    #[test]
    fn the_winner_going_away_hands_over() {
        let mut index = ClaimIndex::default();
        let (a, b) = (contender("a", 200, 1), contender("b", 100, 2));
        index.record(&a, &claims("x", release("r")));
        index.record(&b, &claims("x", release("r")));
        assert_eq!(losers(&index, &["a", "b"]), ["b"]);
        assert_eq!(index.release(&a.key), BTreeSet::from([b.key.clone()]), "the loser is told");
        assert!(losers(&index, &["a", "b"]).is_empty());
        // The winner dropping the service (recording no claims) hands over the same way.
        index.record(&a, &claims("x", release("r")));
        assert_eq!(losers(&index, &["a", "b"]), ["b"]);
        assert_eq!(index.record(&a, &[]), BTreeSet::from([b.key.clone()]));
        assert!(losers(&index, &["a", "b"]).is_empty());
    }

    #[test]
    fn a_winner_waits_while_the_loser_still_has_objects() {
        let mut index = ClaimIndex::default();
        let (old, new) = (contender("old", 100, 1), contender("new", 200, 2));
        index.record(&old, &claims("ingress", release("r")));
        index.record(&new, &claims("ingress", release("r")));
        let loser_has_objects = arbitrate(&index, &new.key, |key, service| *key == old.key && service == "ingress");
        assert!(loser_has_objects.losses.is_empty());
        assert_eq!(
            loser_has_objects.waiting["ingress"],
            "waiting for team-a/old service \"ingress\" to remove its objects for helm-release ingress/r on team-a/prod-eu-1"
        );
        assert_eq!(arbitrate(&index, &new.key, |_, _| false), Arbitration::default(), "loser gone: apply");
        let loser = arbitrate(&index, &old.key, |_, _| true);
        assert!(loser.waiting.is_empty() && loser.losses.contains_key("ingress"), "the loser never waits, it yields");
    }

    #[test]
    fn a_priority_change_turns_the_tables() {
        let mut index = ClaimIndex::default();
        index.record(&contender("a", 200, 1), &claims("x", release("r")));
        index.record(&contender("b", 100, 2), &claims("x", release("r")));
        assert_eq!(losers(&index, &["a", "b"]), ["b"]);
        let touched = index.record(&contender("b", 500, 2), &claims("x", release("r")));
        assert_eq!(touched, BTreeSet::from([NamespacedName::new("team-a", "a")]));
        assert_eq!(losers(&index, &["a", "b"]), ["a"]);
    }

    /// The index keys a claim by its digest: claims whose strings run the same characters
    /// together are told apart, and only a contest keeps the claim's text, until it ends.
    #[test]
    fn claims_are_told_apart_by_digest_and_only_a_contest_keeps_the_text() {
        let claim = |parts: [&str; 4]| {
            let [target, kind, namespace, name] = parts.map(String::from);
            Claim { target, kind, namespace, name }
        };
        let apart = [
            claim(["ab", "c", "ns", "r"]),
            claim(["a", "bc", "ns", "r"]),
            claim(["a", "b", "cns", "r"]),
            claim(["", "", "", ""]),
            claim(["management", "helm-release", "ns", "r"]),
            claim(["management", "helm-release", "n", "sr"]),
        ];
        let digests: BTreeSet<_> = apart.iter().map(ClaimDigest::of).collect();
        assert_eq!(digests.len(), apart.len());
        assert!(std::mem::size_of::<Holding>() <= std::mem::size_of::<Holder>(), "one holder inline, no more");

        let mut index = ClaimIndex::default();
        let (a, b) = (contender("a", 100, 1), contender("b", 100, 2));
        index.record(&a, &claims("x", release("r")));
        let text_kept = |index: &ClaimIndex| index.holders.values().any(|h| matches!(h, Holding::Contested(_)));
        assert!(!text_kept(&index), "uncontested: no text");
        index.record(&b, &claims("x", release("r")));
        assert!(text_kept(&index));
        assert_eq!(index.losses(&b.key)["x"].claim, release("r"), "the contest names the claim");
        index.release(&a.key);
        assert!(!text_kept(&index) && index.losses(&b.key).is_empty(), "the contest over: no text");
        assert_eq!(index.holders.len(), 1);
    }

    #[test]
    fn priority_comes_from_the_provider_config_with_kcms_default() {
        let service_set = |config: serde_json::Value| {
            let spec = serde_json::from_value(serde_json::json!({"provider": {"name": "ksm-flux", "config": config}}))
                .unwrap();
            ServiceSet::new("x", spec)
        };
        assert_eq!(Contender::of(&service_set(serde_json::json!({"priority": 250}))).priority, 250);
        assert_eq!(Contender::of(&service_set(serde_json::json!({}))).priority, DEFAULT_PRIORITY);
    }
}
