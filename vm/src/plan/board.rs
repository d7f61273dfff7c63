//! The actors' hand-off protocol, apart from what they compute: which actor may act on which
//! run with which slots, the messages that follow an act, and the queue of actors to run.
//! [`actors`](super::actors) runs kernels on it; the loom model below checks it alone.
//!
//! Each actor's state sits behind its own lock. A message (a slot made readable, a slot
//! returned) takes the receiver's lock, updates its state and, unless the receiver is queued
//! or acting already (its `scheduled` flag, under the same lock), queues it. A thread that
//! pops an actor takes what it needs for one act under that lock, acts without it, sends its
//! messages, and tries again; when the actor cannot act, it clears `scheduled` under the lock.
//! A message that arrives later finds the flag clear and queues the actor again, so none is
//! lost; one that arrives while the actor acts finds it set and leaves it to the acting thread,
//! which looks again before it clears the flag.

use crate::sync::{Condvar, Mutex};
use std::collections::VecDeque;

/// One register: its producer, and each reader with the register's position among the
/// reader's inputs.
pub(super) struct Wire {
    pub(super) producer: usize,
    pub(super) consumers: Vec<(usize, usize)>,
}

struct State<R> {
    /// Queued or acting.
    scheduled: bool,
    /// The runs it has still to act on, in order, with their ids.
    runs: VecDeque<(u64, R)>,
    /// Per register read: the readable slots, by run.
    readable: Vec<VecDeque<(u64, usize)>>,
    /// Per register written: its free slots.
    free: Vec<Vec<usize>>,
    /// Per register written, per slot: the readers yet to return it.
    pending: Vec<Vec<usize>>,
}

struct Ready {
    queue: VecDeque<usize>,
    stop: bool,
}

/// The protocol's state: one per plan run by actors. `R` is what a run carries.
pub(super) struct Board<R> {
    states: Vec<Mutex<State<R>>>,
    wires: Vec<Wire>,
    /// Per actor: the registers it reads and those it writes.
    consumes: Vec<Vec<usize>>,
    produces: Vec<Vec<usize>>,
    ready: Mutex<Ready>,
    wake: Condvar,
}

/// What an actor took to act once: the run, and the slot of each register it reads and writes.
pub(super) struct Taken<R> {
    pub(super) id: u64,
    pub(super) run: R,
    pub(super) read: Vec<usize>,
    pub(super) write: Vec<usize>,
}

impl<R: Clone> Board<R> {
    /// A board for actors reading `consumes[a]` and writing `produces[a]` of `wires`, every
    /// register with `slots` slots.
    pub(super) fn new(
        wires: Vec<Wire>,
        consumes: Vec<Vec<usize>>,
        produces: Vec<Vec<usize>>,
        slots: usize,
    ) -> Board<R> {
        let states = (consumes.iter().zip(&produces))
            .map(|(c, p)| {
                Mutex::new(State {
                    scheduled: false,
                    runs: VecDeque::new(),
                    readable: vec![VecDeque::new(); c.len()],
                    free: vec![(0..slots).rev().collect(); p.len()],
                    pending: vec![vec![0; slots]; p.len()],
                })
            })
            .collect();
        Board {
            states,
            wires,
            consumes,
            produces,
            ready: Mutex::new(Ready {
                queue: VecDeque::new(),
                stop: false,
            }),
            wake: Condvar::new(),
        }
    }

    /// The registers actor `a` reads, and those it writes.
    pub(super) fn registers(&self, a: usize) -> (&[usize], &[usize]) {
        (&self.consumes[a], &self.produces[a])
    }

    /// Hands run `id` to every actor. Runs must be started in the order of their ids.
    pub(super) fn start(&self, id: u64, run: R) {
        for a in 0..self.states.len() {
            let mut st = self.states[a].lock();
            st.runs.push_back((id, run.clone()));
            self.queue(a, &mut st.scheduled);
        }
    }

    /// Queues actor `a` unless it is queued or acting (`scheduled`, under its lock).
    fn queue(&self, a: usize, scheduled: &mut bool) {
        if !*scheduled {
            *scheduled = true;
            self.ready.lock().queue.push_back(a);
            self.wake.notify_one();
        }
    }

    /// The next queued actor, waiting for one; `None` once the board is stopped and the queue
    /// empty.
    pub(super) fn next(&self) -> Option<usize> {
        let mut r = self.ready.lock();
        loop {
            if let Some(a) = r.queue.pop_front() {
                return Some(a);
            }
            if r.stop {
                return None;
            }
            self.wake.wait(&mut r);
        }
    }

    /// Stops the board: [`next`](Self::next) returns `None` once the queue is empty.
    pub(super) fn stop(&self) {
        self.ready.lock().stop = true;
        self.wake.notify_all();
    }

    /// Takes what actor `a` (popped by [`next`](Self::next)) needs for its next act, if every
    /// register it reads has a readable slot of its next run and every register it writes a
    /// free slot. Otherwise it is no longer scheduled: a message will queue it again.
    pub(super) fn take(&self, a: usize) -> Option<Taken<R>> {
        let mut st = self.states[a].lock();
        let st = &mut *st;
        let ready = st.runs.front().is_some_and(|&(id, _)| {
            st.readable
                .iter()
                .all(|q| q.front().is_some_and(|&(r, _)| r == id))
                && st.free.iter().all(|f| !f.is_empty())
        });
        if !ready {
            st.scheduled = false;
            return None;
        }
        let (id, run) = st.runs.pop_front()?;
        let read = (st.readable.iter_mut())
            .map(|q| q.pop_front().map_or(0, |(_, s)| s))
            .collect();
        let write: Vec<usize> = st.free.iter_mut().map(|f| f.pop().unwrap_or(0)).collect();
        for (k, &s) in write.iter().enumerate() {
            st.pending[k][s] = self.wires[self.produces[a][k]].consumers.len();
        }
        Some(Taken {
            id,
            run,
            read,
            write,
        })
    }

    /// After actor `a` acted on `t`: what it wrote is readable to each reader, and what it
    /// read goes back to each producer.
    pub(super) fn acted(&self, a: usize, t: &Taken<R>) {
        for (k, &w) in self.produces[a].iter().enumerate() {
            let wire = &self.wires[w];
            if wire.consumers.is_empty() {
                self.give_back(a, k, t.write[k]);
            }
            for &(c, pos) in &wire.consumers {
                let mut st = self.states[c].lock();
                st.readable[pos].push_back((t.id, t.write[k]));
                self.queue(c, &mut st.scheduled);
            }
        }
        for (k, &w) in self.consumes[a].iter().enumerate() {
            let p = self.wires[w].producer;
            let pos = (self.produces[p].iter()).position(|&x| x == w).unwrap_or(0);
            self.give_back(p, pos, t.read[k]);
        }
    }

    /// One reader returns slot `slot` of actor `p`'s register `k`.
    fn give_back(&self, p: usize, k: usize, slot: usize) {
        let mut st = self.states[p].lock();
        let st = &mut *st;
        let left = &mut st.pending[k][slot];
        *left = left.saturating_sub(1);
        if *left == 0 {
            st.free[k].push(slot);
            self.queue(p, &mut st.scheduled);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::thread;

    /// A producer and a reader, one slot, two runs, two threads: every actor acts on every run
    /// exactly once, the reader after the producer, the producer's second act after the
    /// reader's first (its one slot came back), and no message is lost (everything acts, so
    /// the model ends).
    #[test]
    fn actors_act_once_per_run_in_order_and_no_message_is_lost() {
        loom::model(|| {
            let wires = vec![Wire {
                producer: 0,
                consumers: vec![(1, 0)],
            }];
            let board: Arc<Board<()>> = Arc::new(Board::new(
                wires,
                vec![vec![], vec![0]],
                vec![vec![0], vec![]],
                1,
            ));
            let log = Arc::new(Mutex::new(Vec::new()));
            let acts = Arc::new(AtomicUsize::new(0));
            let worker =
                |b: Arc<Board<()>>, log: Arc<Mutex<Vec<(usize, u64)>>>, acts: Arc<AtomicUsize>| {
                    move || {
                        while let Some(a) = b.next() {
                            while let Some(t) = b.take(a) {
                                log.lock().push((a, t.id));
                                b.acted(a, &t);
                                acts.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    }
                };
            let t1 = thread::spawn(worker(board.clone(), log.clone(), acts.clone()));
            let t2 = thread::spawn(worker(board.clone(), log.clone(), acts.clone()));
            board.start(0, ());
            board.start(1, ());
            while acts.load(Ordering::SeqCst) < 4 {
                thread::yield_now();
            }
            board.stop();
            t1.join().unwrap();
            t2.join().unwrap();
            let log = log.lock().clone();
            let at = |x: (usize, u64)| log.iter().position(|&e| e == x).unwrap();
            assert_eq!(log.len(), 4, "{log:?}");
            assert!(at((0, 0)) < at((1, 0)), "{log:?}");
            assert!(at((0, 1)) < at((1, 1)), "{log:?}");
            assert!(
                at((1, 0)) < at((0, 1)),
                "one slot: the reader returned it first: {log:?}"
            );
        });
    }
}
