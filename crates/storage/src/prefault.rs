//! The background thread that prepares memory ahead of need: it runs jobs (map and touch a chunk of
//! records, a hash index's next slot array) one after another, off the threads that run transactions.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, OnceLock};

/// A job for the background thread.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

struct Prefaulter {
    jobs: Mutex<VecDeque<Job>>,
    wake: Condvar,
}

/// Queues `job` for the background thread (started on first use).
pub(crate) fn submit(job: Job) {
    let p = prefaulter();
    p.jobs.lock().expect("prefault jobs").push_back(job);
    p.wake.notify_one();
}

fn prefaulter() -> &'static Prefaulter {
    static PREFAULTER: OnceLock<Prefaulter> = OnceLock::new();
    PREFAULTER.get_or_init(|| {
        std::thread::Builder::new()
            .name("phasedb-prefault".into())
            .spawn(run)
            .expect("spawn the prefault thread");
        Prefaulter {
            jobs: Mutex::new(VecDeque::new()),
            wake: Condvar::new(),
        }
    })
}

fn run() {
    let p = prefaulter();
    loop {
        let job = {
            let mut jobs = p.jobs.lock().expect("prefault jobs");
            loop {
                match jobs.pop_front() {
                    Some(job) => break job,
                    None => jobs = p.wake.wait(jobs).expect("prefault jobs"),
                }
            }
        };
        job();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn jobs_run_in_the_background() {
        let (tx, rx) = std::sync::mpsc::channel();
        for i in 0..3 {
            let tx = tx.clone();
            super::submit(Box::new(move || tx.send(i).unwrap()));
        }
        let got: Vec<i32> = (0..3).map(|_| rx.recv().unwrap()).collect();
        assert_eq!(got, vec![0, 1, 2]);
    }
}
