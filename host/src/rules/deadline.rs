//! Evaluations on threads of their own, so that whoever waits for one can stop waiting at a
//! deadline: the backstop behind the cost estimate (`cost.rs`). Compilations run there too, for
//! the threads' deep stacks.
//!
//! A thread cannot be cancelled: an evaluation its caller gave up on runs on to its end, holding
//! its thread and a CPU. The estimate is what keeps that from happening; the caller remembers
//! the rule so that it is never started again.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};

/// Work for an evaluator thread.
type Job = Box<dyn FnOnce() + Send>;

/// Evaluator threads kept waiting for work when idle; more are started while all are busy, and
/// end after their job when this many already wait.
const IDLE: usize = 8;
/// An evaluator thread's stack: parsing a rule recurses along its longest chain, up to 8,192
/// deep within `MAX_RULE_BYTES`, at some hundreds of bytes a level (more in a debug build).
/// Only the pages a thread touches take memory.
const STACK: usize = 64 * 1024 * 1024;

/// The idle evaluator threads, each by the sender of its next job.
static WAITING: Mutex<Vec<Sender<Job>>> = Mutex::new(Vec::new());

/// Starts `job` on an evaluator thread; it hands its results to the returned receiver, in order,
/// through the sender it is given, and should stop once a send fails (the caller stopped
/// waiting). Fails only when no thread can be started.
pub fn start<T: Send + 'static>(job: impl FnOnce(Sender<T>) + Send + 'static) -> std::io::Result<Receiver<T>> {
    let (results, received) = channel();
    let mut job: Job = Box::new(move || job(results));
    while let Some(waiting) = waiting().pop() {
        match waiting.send(job) {
            Ok(()) => return Ok(received),
            // That thread has ended: try the next.
            Err(unsent) => job = unsent.0,
        }
    }
    std::thread::Builder::new().name("ksm-rules".into()).stack_size(STACK).spawn(move || evaluator(job))?;
    Ok(received)
}

/// An evaluator thread: runs `job`, then waits for the next unless enough others wait.
fn evaluator(mut job: Job) {
    let (next, jobs) = channel::<Job>();
    loop {
        // A panicking job is its caller's to report (its sender is dropped); the thread lives on.
        let _ = catch_unwind(AssertUnwindSafe(job));
        {
            let mut waiting = waiting();
            if waiting.len() >= IDLE {
                return;
            }
            waiting.push(next.clone());
        }
        match jobs.recv() {
            Ok(received) => job = received,
            Err(_) => return,
        }
    }
}

fn waiting() -> std::sync::MutexGuard<'static, Vec<Sender<Job>>> {
    WAITING.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::RecvTimeoutError;
    use std::time::Duration;

    #[test]
    fn results_come_in_order_and_a_caller_may_stop_waiting_for_a_job_that_runs_on() {
        let squares = start(|results| {
            for i in 0..3u64 {
                if results.send(i * i).is_err() {
                    return;
                }
            }
        })
        .unwrap();
        assert_eq!(squares.iter().collect::<Vec<_>>(), [0, 1, 4]);

        let (release, released) = channel::<()>();
        let stuck = start(move |results: Sender<()>| {
            let _ = released.recv();
            let _ = results.send(());
        })
        .unwrap();
        assert_eq!(stuck.recv_timeout(Duration::from_millis(20)), Err(RecvTimeoutError::Timeout));
        let other = start(|results| results.send("served").unwrap()).unwrap();
        assert_eq!(other.recv_timeout(Duration::from_secs(5)), Ok("served"), "another thread serves meanwhile");
        release.send(()).unwrap();
        assert_eq!(stuck.recv_timeout(Duration::from_secs(5)), Ok(()));
    }

    #[test]
    fn a_panicking_job_ends_its_results_and_its_thread_serves_on() {
        let panicked = start(|_: Sender<()>| panic!("a bug")).unwrap();
        assert!(panicked.recv_timeout(Duration::from_secs(5)).is_err());
        let next = start(|results| results.send(1).unwrap()).unwrap();
        assert_eq!(next.recv_timeout(Duration::from_secs(5)), Ok(1));
    }
}
