//! Shared test helpers.
#![allow(dead_code)]

pub mod reference;

use std::sync::mpsc;
use std::time::Duration;

/// An `f32` tensor's values as their bits, to compare results bit for bit.
pub fn bits(t: &eddy::Tensor) -> Vec<u32> {
    (t.to_vec::<f32>().unwrap())
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// Runs `f` on its own thread and fails the test if it does not finish within `secs`
/// (so a hang fails instead of stalling CI). Panics inside `f` propagate.
///
/// Under Miri, which interprets about a hundred times slower, the limit is a hundred times longer.
pub fn watchdog<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let secs = if cfg!(miri) { secs * 100 } else { secs };
    let (tx, rx) = mpsc::channel();
    let h = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            let r = f();
            let _ = tx.send(());
            r
        })
        .unwrap();
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("watchdog: test did not finish within {secs} s")
        }
    }
}

/// Polls `cond` until it holds or `ms` pass; returns whether it held.
pub fn eventually(ms: u64, mut cond: impl FnMut() -> bool) -> bool {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_millis(ms) {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}
