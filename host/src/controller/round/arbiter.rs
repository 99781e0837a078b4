//! The controller's side of claim arbitration: the one [`ClaimIndex`] of every ServiceSet this
//! host serves, filled from all of them before the first reconcile, kept current by each
//! reconcile, and waking the ServiceSets whose outcome a change may have turned.

use crate::controller::plugin_kinds::child_kinds::Waker;
use crate::k0rdent::NamespacedName;
use crate::k0rdent::ServiceSet;
use crate::plan::claims::{Arbitration, ClaimIndex, Contender, ServiceClaims, arbitrate};
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The claim index and the way to wake ServiceSets.
pub struct Arbiter {
    index: Mutex<ClaimIndex>,
    wake: Waker,
}

impl Arbiter {
    /// An empty arbiter that wakes ServiceSets through `wake`.
    pub fn new(wake: Waker) -> Self {
        Self { index: Mutex::default(), wake }
    }

    /// Records what `service_set`'s services claim now; returns which services lose or must
    /// wait (`has_objects` tells whether another ServiceSet's service still has objects), and
    /// wakes the other ServiceSets contending for the same claims.
    pub fn arbitrate(
        &self,
        service_set: &ServiceSet,
        claims: &[ServiceClaims],
        has_objects: impl Fn(&NamespacedName, &str) -> bool,
    ) -> Arbitration {
        let contender = Contender::of(service_set);
        let (touched, arbitration) = {
            let mut index = self.index.lock().unwrap();
            let touched = index.record(&contender, claims);
            (touched, arbitrate(&index, &contender.key, has_objects))
        };
        self.wake_all(touched);
        arbitration
    }

    /// Records claims without waking anyone (filling the index before the first reconcile).
    pub fn record(&self, service_set: &ServiceSet, claims: &[ServiceClaims]) {
        self.index.lock().unwrap().record(&Contender::of(service_set), claims);
    }

    /// Forgets `service_set`'s claims (deleted or no longer served) and wakes its contenders,
    /// which may now take over.
    pub fn release(&self, service_set: &NamespacedName) {
        let touched = self.index.lock().unwrap().release(service_set);
        self.wake_all(touched);
    }

    fn wake_all(&self, keys: BTreeSet<NamespacedName>) {
        for key in keys {
            let _ = self.wake.unbounded_send(key);
        }
    }
}
