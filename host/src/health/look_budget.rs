//! What one look at a target's workloads (all of one ServiceSet's checked services) may read in
//! all. Each call to another cluster is capped on its own, but a look makes a call per kind the
//! rules name, per namespace of its services, per page: a cluster that answers each with as much
//! as a call may hold would have the host read gigabytes in one look. Every byte answered counts;
//! of the objects, those kept (the services' workloads): a namespace's other objects are read
//! past, not kept. Past this budget the look stops, and the services it did not finish are not
//! verified.

/// The bytes of the answers of one look, in all.
pub const LOOK_BYTES: usize = 32 << 20;
/// The services' objects the answers of one look hold, in all: a service's workloads are a
/// handful of objects of each kind.
pub const LOOK_OBJECTS: usize = 10_000;

/// What a look has read so far.
#[derive(Debug, Default)]
pub struct Spending {
    bytes: usize,
    objects: usize,
}

/// The bound a look's answers passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Spent {
    /// [`LOOK_BYTES`].
    #[error("more than {} MiB", LOOK_BYTES >> 20)]
    Bytes,
    /// [`LOOK_OBJECTS`].
    #[error("more than {LOOK_OBJECTS} objects")]
    Objects,
}

impl Spending {
    /// The objects the look may still keep: what a list answer is read into at most.
    pub fn objects_left(&self) -> usize {
        LOOK_OBJECTS.saturating_sub(self.objects)
    }

    /// Counts an answer of `bytes` holding `objects` of the look's services (kept or not): the
    /// bound passed, if any, after which the look stops.
    pub fn spend(&mut self, bytes: usize, objects: usize) -> Result<(), Spent> {
        self.bytes = self.bytes.saturating_add(bytes);
        self.objects = self.objects.saturating_add(objects);
        if self.objects > LOOK_OBJECTS {
            Err(Spent::Objects)
        } else if self.bytes > LOOK_BYTES {
            Err(Spent::Bytes)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_may_read_up_to_its_budget_and_not_one_more() {
        let mut spending = Spending::default();
        assert_eq!(spending.spend(LOOK_BYTES - 1, LOOK_OBJECTS - 1), Ok(()));
        assert_eq!(spending.objects_left(), 1);
        assert_eq!(spending.spend(1, 1), Ok(()), "the budget itself is allowed");
        assert_eq!(spending.objects_left(), 0);
        assert_eq!(spending.spend(0, 1), Err(Spent::Objects));

        let mut spending = Spending::default();
        assert_eq!(spending.spend(LOOK_BYTES, 0), Ok(()));
        assert_eq!(spending.spend(1, 0), Err(Spent::Bytes));
        assert_eq!(Spent::Bytes.to_string(), "more than 32 MiB");
        assert_eq!(Spent::Objects.to_string(), "more than 10000 objects");
        assert_eq!(Spending::default().spend(usize::MAX, usize::MAX), Err(Spent::Objects), "no overflow");
    }
}
