//! client-go's work queue, as controller-runtime drives a controller with it: a FIFO of keys
//! with deduplication (a key added while queued is queued once; added while being processed,
//! it is queued again when processing is done), and delayed adds that keep only the earliest
//! time per key (`AddAfter`, used for `RequeueAfter` and for retries after errors).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// A work queue of keys (ServiceSet names).
#[derive(Default)]
pub struct Queue {
    state: Mutex<State>,
    ready: Notify,
}

#[derive(Default)]
struct State {
    /// Keys waiting for a worker, oldest first.
    queue: VecDeque<String>,
    /// Keys that need processing (queued, or added again while being processed).
    dirty: HashSet<String>,
    /// Keys a worker has.
    processing: HashSet<String>,
    /// Keys to be added later, with when.
    waiting: HashMap<String, Instant>,
}

impl Queue {
    /// Marks `key` for processing: queued at the end unless it is queued already; if a worker
    /// has it, it is queued when the worker is done.
    pub fn add(&self, key: &str) {
        let mut state = self.state.lock().expect("queue lock");
        if !state.dirty.insert(key.to_string()) || state.processing.contains(key) {
            return;
        }
        state.queue.push_back(key.to_string());
        drop(state);
        self.ready.notify_one();
    }

    /// Adds `key` after `delay`, unless it is due to be added sooner already.
    pub fn add_after(self: &Arc<Self>, key: &str, delay: Duration) {
        let at = Instant::now() + delay;
        {
            let mut state = self.state.lock().expect("queue lock");
            match state.waiting.get(key) {
                Some(earlier) if *earlier <= at => return,
                _ => state.waiting.insert(key.to_string(), at),
            };
        }
        let (queue, key) = (self.clone(), key.to_string());
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let mut state = queue.state.lock().expect("queue lock");
            // Superseded by a sooner add, which removed the entry or replaced its time.
            if state.waiting.get(&key) == Some(&at) {
                state.waiting.remove(&key);
                drop(state);
                queue.add(&key);
            }
        });
    }

    /// The oldest queued key, once there is one; the caller must call [`done`](Self::done).
    pub async fn get(&self) -> String {
        loop {
            let ready = self.ready.notified();
            {
                let mut state = self.state.lock().expect("queue lock");
                if let Some(key) = state.queue.pop_front() {
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    if !state.queue.is_empty() {
                        // One notification may have stood for several adds: pass it on.
                        self.ready.notify_one();
                    }
                    return key;
                }
            }
            ready.await;
        }
    }

    /// Ends the processing of `key`, queueing it again if it was added meanwhile.
    pub fn done(&self, key: &str) {
        let mut state = self.state.lock().expect("queue lock");
        state.processing.remove(key);
        if state.dirty.contains(key) {
            state.queue.push_back(key.to_string());
            drop(state);
            self.ready.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keys_come_out_in_order_once_and_again_after_processing() {
        let queue = Queue::default();
        for key in ["a", "b", "a", "c"] {
            queue.add(key);
        }
        assert_eq!(queue.get().await, "a");
        queue.add("a"); // while a worker has it
        assert_eq!(queue.get().await, "b");
        assert_eq!(queue.get().await, "c");
        queue.done("a");
        assert_eq!(queue.get().await, "a");
    }

    #[tokio::test]
    async fn a_delayed_add_keeps_the_earliest_time() {
        let queue = Arc::new(Queue::default());
        queue.add_after("a", Duration::from_secs(30));
        queue.add_after("a", Duration::from_millis(50));
        queue.add_after("a", Duration::from_millis(100));
        let started = Instant::now();
        assert_eq!(queue.get().await, "a");
        assert!(started.elapsed() < Duration::from_secs(5), "added after {:?}", started.elapsed());
        queue.done("a");
        let state = queue.state.lock().expect("queue lock");
        assert!(state.waiting.is_empty() && state.queue.is_empty(), "the later adds are dropped");
    }
}
