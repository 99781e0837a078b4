//! Conditions as the host writes them on every object (ServiceSet, AdapterPlugin, SMP):
//! typed statuses, messages within the API's bound, and a transition time that moves only when
//! the status does — Flux's `runtime/conditions` is the model — so that an unchanged world
//! serializes identically and costs no write. Every condition type and reason the host writes is
//! one of [`types`] and [`reasons`].

pub mod reasons;
pub mod types;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// A condition's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The condition holds.
    True,
    /// It does not.
    False,
    /// The host could not tell.
    Unknown,
}

impl Status {
    /// The API's string for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    /// `True` when `holds`, else `False`.
    pub fn of(holds: bool) -> Self {
        if holds { Self::True } else { Self::False }
    }
}

/// The longest message the host writes, in bytes: `metav1.Condition.message`'s `maxLength`. A
/// longer one (built from plugin or API-server text) would make the API server refuse the whole
/// status write, again on every retry.
pub const MAX_MESSAGE: usize = 32_768;
/// What ends a cut message.
const CUT: &str = " … (cut)";

/// `message` cut to at most [`MAX_MESSAGE`] bytes, on a character boundary, marked as cut.
pub fn bounded(message: &str) -> String {
    cut(message, MAX_MESSAGE)
}

/// `message` cut to at most `max` bytes (`max` leaves room for the mark), on a character
/// boundary, marked as cut.
pub fn cut(message: &str, max: usize) -> String {
    if message.len() <= max {
        return message.to_string();
    }
    let end = message.floor_char_boundary(max.saturating_sub(CUT.len()));
    format!("{}{CUT}", &message[..end])
}

/// A condition with `lastTransitionTime = now` (kept by [`set`] and [`merge`] when the status
/// did not change) and its message [`bounded`].
pub fn new(type_: &str, status: Status, reason: &str, message: &str, generation: Option<i64>, now: &Time) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.as_str().into(),
        reason: reason.into(),
        message: bounded(message),
        observed_generation: generation,
        last_transition_time: now.clone(),
    }
}

/// Puts `new` into `conditions` (a list keyed by type), keeping the old transition time when the
/// condition's status did not change.
pub fn set(conditions: &mut Vec<Condition>, mut new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time.clone();
            }
            *old = new;
        }
        None => conditions.push(new),
    }
}

/// Defines one `mark_<status>` function per status: [`set`] the condition `new` builds.
macro_rules! marks {
    ($($(#[$doc:meta])* $name:ident => $status:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(
            conditions: &mut Vec<Condition>,
            type_: &str,
            reason: &str,
            message: &str,
            generation: Option<i64>,
            now: &Time,
        ) {
            set(conditions, new(type_, Status::$status, reason, message, generation, now));
        }
    )*};
}

marks! {
    /// Sets condition `type_` `True` for `reason` in `conditions`, observed at `generation`; its
    /// transition time is `now` unless it was `True` already (see [`set`]).
    mark_true => True;
    /// Sets condition `type_` `False` for `reason` in `conditions` (see [`mark_true`]).
    mark_false => False;
    /// Sets condition `type_` `Unknown` for `reason` in `conditions` (see [`mark_true`]).
    mark_unknown => Unknown;
}

/// Removes the condition of `type_`, if any.
pub fn remove(conditions: &mut Vec<Condition>, type_: &str) {
    conditions.retain(|c| c.type_ != type_);
}

/// `new` as the whole list, each keeping the transition time of the `old` condition of the
/// same type when its status is unchanged.
pub fn merge(old: &[Condition], new: Vec<Condition>) -> Vec<Condition> {
    let mut merged = old.iter().filter(|o| new.iter().any(|n| n.type_ == o.type_)).cloned().collect();
    for condition in new {
        set(&mut merged, condition);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn condition(type_: &str, status: Status, time: i64) -> Condition {
        new(type_, status, "R", "m", Some(1), &at(time))
    }

    #[test]
    fn statuses_are_the_api_strings() {
        let strings: Vec<_> =
            [Status::True, Status::False, Status::Unknown].map(|s| condition("T", s, 0).status).into();
        assert_eq!(strings, ["True", "False", "Unknown"]);
        assert_eq!((Status::of(true), Status::of(false)), (Status::True, Status::False));
    }

    #[test]
    fn set_keeps_the_transition_time_while_the_status_holds() {
        let mut conditions = vec![condition("A", Status::True, 10)];
        set(&mut conditions, condition("A", Status::True, 20));
        assert_eq!(conditions[0].last_transition_time, at(10));
        set(&mut conditions, condition("A", Status::False, 30));
        assert_eq!(conditions[0].last_transition_time, at(30));
        set(&mut conditions, condition("B", Status::True, 40));
        assert_eq!(conditions.len(), 2);
        remove(&mut conditions, "A");
        assert_eq!(conditions.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(), ["B"]);
    }

    #[test]
    fn marks_move_the_transition_time_only_when_the_status_changes() {
        let mut conditions = Vec::new();
        mark_false(&mut conditions, types::TRANSLATED, reasons::PLUGIN_NOT_READY, "first", Some(1), &at(10));
        mark_false(&mut conditions, types::TRANSLATED, reasons::PLUGIN_ERROR, "second", Some(2), &at(20));
        let c = &conditions[0];
        assert_eq!((c.status.as_str(), c.reason.as_str(), c.message.as_str()), ("False", "PluginError", "second"));
        assert_eq!((c.last_transition_time.clone(), c.observed_generation), (at(10), Some(2)), "still False");
        mark_true(&mut conditions, types::TRANSLATED, reasons::SUCCEEDED, "", Some(3), &at(30));
        let c = &conditions[0];
        assert_eq!(
            (c.status.as_str(), c.last_transition_time.clone(), c.observed_generation),
            ("True", at(30), Some(3))
        );
        mark_unknown(&mut conditions, types::TRANSLATED, reasons::NOT_REACHED, "", None, &at(40));
        let c = &conditions[0];
        assert_eq!(
            (c.status.as_str(), c.last_transition_time.clone(), c.observed_generation),
            ("Unknown", at(40), None)
        );
        assert_eq!(conditions.len(), 1, "one condition per type");
    }

    #[test]
    fn merge_keeps_time_only_for_unchanged_status_and_drops_the_rest() {
        let old = vec![
            condition("A", Status::True, 10),
            condition("B", Status::True, 10),
            condition("Gone", Status::True, 1),
        ];
        let merged = merge(
            &old,
            vec![condition("A", Status::True, 99), condition("B", Status::False, 99), condition("C", Status::True, 99)],
        );
        let times: Vec<_> = merged.iter().map(|c| (c.type_.as_str(), c.last_transition_time.clone())).collect();
        assert_eq!(times, [("A", at(10)), ("B", at(99)), ("C", at(99))]);
        let unchanged = &old[..2];
        assert_eq!(merge(unchanged, unchanged.to_vec()), unchanged, "no change, identical conditions");
    }

    #[test]
    fn messages_are_bounded_on_a_character_boundary() {
        assert_eq!(bounded("short"), "short");
        let long = "é".repeat(MAX_MESSAGE); // two bytes each
        let cut = bounded(&long);
        assert!(cut.len() <= MAX_MESSAGE && cut.ends_with(CUT), "{} bytes", cut.len());
        assert!(new("T", Status::False, "R", &long, None, &at(0)).message.len() <= MAX_MESSAGE);
    }
}
