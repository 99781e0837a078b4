//! Kubernetes Events on ServiceSets and AdapterPlugins, for the transitions
//! [`plan::events`](crate::plan::events) picks. Best effort: an Event that cannot be written is
//! logged, never retried, and never fails a reconcile.

use crate::plan::events::Note;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};

/// Publishes Events as this host.
pub struct Events {
    recorder: Recorder,
}

impl Events {
    /// Events reported by controller `name` (the adapter Deployment).
    pub fn new(client: Client, name: &str) -> Self {
        let instance = std::env::var("HOSTNAME").ok();
        Self { recorder: Recorder::new(client, Reporter { controller: name.into(), instance }) }
    }

    /// Publishes `notes` about `object`, the outcome of `action`.
    pub async fn publish<K: Resource<DynamicType = ()>>(&self, object: &K, action: &str, notes: &[Note]) {
        let reference: ObjectReference = object.object_ref(&());
        for note in notes {
            let event = Event {
                type_: if note.warning { EventType::Warning } else { EventType::Normal },
                reason: note.reason.clone(),
                note: Some(truncate(&note.message)),
                action: action.into(),
                secondary: None,
            };
            if let Err(e) = self.recorder.publish(&event, &reference).await {
                tracing::debug!("publishing event {}: {e}", note.reason);
            }
        }
    }
}

/// Event notes are limited to 1 kB.
fn truncate(message: &str) -> String {
    if message.len() <= 1024 {
        return message.to_string();
    }
    let mut end = 1020;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}
