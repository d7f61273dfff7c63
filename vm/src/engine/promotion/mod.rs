//! Automatic promotion: a thread's op calls between two sync points, once they repeat, run as a
//! plan.
//!
//! With the switch on ([`VmBuilder::promotion`](crate::VmBuilder::promotion)), the engine
//! notes each op call of the thread that makes them (the window's owner): its kernel's name,
//! its stream, and where each operand comes from: a blob from before the window (by first
//! use), or one an earlier call of the window made (by call and position), with its size. A
//! host access ([`Vm::read_blob`], [`Vm::write_blob`], [`Vm::sync`]) ends the window, noting
//! which blobs made in it are still held. When two windows in a row have the same notes, the
//! engine holds the next window's calls instead of running them, checking each against the
//! notes. If the whole window matches, its calls run as one plan run (compiled from the first
//! such window, then reused): the same kernels (each window's own, so their parameters are
//! this window's) on the same operands, the intermediates in the plan's arena. At the first
//! call that differs, the calls held so far run as usual, in order, and so does the rest of
//! the window: it never runs a plan it does not match, so the values are those of eager
//! execution, bit for bit. Releases of blobs are held with the calls, in order.
//!
//! Another thread's call, any other instruction, or a capture ends the holding: what was held
//! runs first.
//!
//! Holding costs the overlap of the calls with the computing of those before them, so each
//! kind of window is timed both ways, and one whose plan runs are slower goes back to eager
//! execution for a while ([`profit`]).

use super::Vm;
use crate::Counted;
use crate::blob::Blob;
use crate::captured::Captured;
use crate::error::{Caller, Result};
use crate::instruction::Kernel;
use crate::plan::{Plan, PlanPass, StandIn};
use crate::shared::{CAPTURES, PROMOTION_HOLDING, PROMOTION_ON, SUBMIT_SLOW};
use crate::stream::StreamId;
use parking_lot::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::thread::ThreadId;
use std::time::Instant;

mod profit;
mod run;
mod shelf;
mod window;
use profit::Profit;
use window::{Found, Held, Note, Notes, Spare, Window};

/// The scheduler, held by a user thread.
pub(crate) type SchedGuard<'a> = parking_lot::MutexGuard<'a, crate::scheduler::Scheduler>;

/// How many windows in a row must match before the next one is held.
const REPEATS: usize = 2;

/// What automatic promotion did.
///
/// # Examples
///
/// ```
/// let vm = eddy_vm::Vm::builder().promotion(true).build()?;
/// assert_eq!(vm.promotion_stats().unwrap().plan_runs, 0);
/// assert!(eddy_vm::Vm::builder().promotion(false).build()?.promotion_stats().is_none());
/// # Ok::<(), eddy_vm::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PromotionStats {
    /// Windows ended (by a host access).
    pub windows: u64,
    /// Windows run as one plan run.
    pub plan_runs: u64,
    /// Plans compiled.
    pub compiled: u64,
    /// Calls the plan pass merged away, over the plans compiled: a compiled window of `n`
    /// calls whose plan has `m` steps adds `n - m`.
    pub merged: u64,
    /// Plan runs whose window's steps went through the plan pass
    /// ([`Vm::set_plan_pass`]): the first of each plan, and those whose kernels describe
    /// themselves otherwise than the last such window's. The other plan runs reuse the steps
    /// the pass made then (see [`PlanPass`]).
    pub passes: u64,
    /// Held windows that ran as usual after all: a call differed from the notes, or another
    /// instruction or another thread's host access came first.
    pub fallbacks: u64,
    /// Times a kind of window went back to eager execution for a while because its plan runs,
    /// or a held window's calls alone, were timed slower than its eager windows (see
    /// [`VmBuilder::promotion_measured`](crate::VmBuilder::promotion_measured)).
    pub backed_off: u64,
    /// Windows that ran eagerly without their calls being noted: each began like a kind that
    /// runs eagerly for now, so its calls cost what they cost with the switch off.
    pub quiet: u64,
    /// Compiled plans let go to give their arenas back to a device that ran out of memory
    /// (or to [`Vm::empty_cache`]); their kinds compile again when they come back.
    pub shed: u64,
}

/// Notes seen at the end of windows: how often, whether all their calls are on one stream,
/// the plan compiled for them, and whether it pays.
struct Seen {
    /// Names the kind while `seen` reorders.
    id: u64,
    notes: Notes,
    count: usize,
    one_stream: bool,
    /// What lets the next windows reuse the steps a plan pass made for `plan`.
    reuse: Option<run::Reuse>,
    profit: Profit,
}

/// Tests: what a time stands for (see `Promotion::set_clock`).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timed {
    /// A window run eagerly.
    Eager,
    /// A window run as a plan.
    Plan,
    /// A held window's calls, until its end.
    HeldCalls,
}

/// A window that ended and is to be timed when its host access returns.
struct Pending {
    thread: ThreadId,
    /// The kind's `Seen::id`.
    id: u64,
    promoted: bool,
    /// When the host access before it returned.
    start: Instant,
}

/// How many distinct windows the engine remembers (a loop whose windows cycle through a few
/// kinds, such as every eighth step reading the loss, is promoted kind by kind).
const REMEMBERED: usize = 8;

#[derive(Default)]
struct State {
    window: Window,
    /// Least recently seen first.
    seen: Vec<Seen>,
    next_id: u64,
    /// How many calls the last window had: room for the next one's notes.
    last_calls: usize,
    /// The last window's epoch (see `Window::find`).
    epoch: u32,
    spare: Spare,
    stats: PromotionStats,
    /// The thread whose host access returned last, and when.
    last_done: Option<(ThreadId, Instant)>,
    pending: Option<Pending>,
    /// Tests: each time taken, by what is timed, instead of the clock's.
    #[cfg(test)]
    clock: Option<fn(Timed) -> std::time::Duration>,
}

impl State {
    /// The kinds the next window may be held for: seen often enough, on one stream, whose
    /// plan runs have not lost lately, and which begin unlike every kind that runs eagerly for
    /// now (a window of that kind would be held as far as the two agree, seven steps of an
    /// eight-step window say, then run late).
    fn holdable(&self) -> Vec<usize> {
        let eager_now: Vec<&Note> = (self.seen.iter())
            .filter(|e| !e.profit.holds())
            .filter_map(|e| e.notes.calls.first())
            .collect();
        (self.seen.iter().enumerate())
            .filter(|(_, e)| {
                e.count >= REPEATS
                    && e.one_stream
                    && (e.notes.calls.first()).is_some_and(|c| !eager_now.contains(&c))
            })
            .map(|(k, _)| k)
            .collect()
    }

    /// Whether the held window of kind `c` ending now (by thread `me`) took longer in its
    /// calls alone than the kind's eager windows take: then the kind backs off.
    fn held_calls_lose(&mut self, c: usize, me: ThreadId, measured: bool) -> bool {
        let calls = (self.last_done)
            .filter(|&(t, _)| measured && t == me)
            .map(|(_, at)| at.elapsed());
        #[cfg(test)]
        let calls = calls.map(|d| self.clock.map_or(d, |c| c(Timed::HeldCalls)));
        let lose = calls.is_some_and(|d| self.seen[c].profit.held_calls(d));
        if lose {
            self.stats.backed_off += 1;
        }
        lose
    }

    /// Gives up holding the window: it goes on as usual. Returns what was held, to run first.
    fn give_up(&mut self) -> Vec<Held> {
        self.window.holding = false;
        self.stats.fallbacks += 1;
        std::mem::take(&mut self.window.held)
    }
}

/// The engine's promotion state.
#[derive(Default)]
pub(crate) struct Promotion {
    /// Whether windows are timed, and kinds whose plan runs lose go back to eager execution.
    measured: bool,
    state: Mutex<State>,
    /// The pass run on each window's steps before they run as a plan.
    pass: OnceLock<PlanPass>,
    /// Held by a hook from its first look at the state until what it decided (running held
    /// calls, a plan run) is submitted: a call of any thread that comes after waits, so held
    /// calls always reach the engine before later ones. Never taken on an engine thread.
    order: Mutex<()>,
    /// The plans compiled, by kind.
    shelf: std::sync::Arc<shelf::Shelf>,
}

thread_local! {
    /// Set while this thread submits what a hook decided: its own submissions pass the hooks.
    static SUBMITTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread's calls bypass the hooks: it is submitting what a hook decided, or it
/// is an engine thread (which must never wait for a user thread's hook).
fn bypass() -> bool {
    SUBMITTING.with(|s| s.get()) || crate::exec::in_engine()
}

/// This thread's id, without `thread::current`'s handle.
fn this_thread() -> std::thread::ThreadId {
    thread_local! {
        static ME: std::thread::ThreadId = std::thread::current().id();
    }
    ME.with(|m| *m)
}

/// What to do once the state's lock is let go.
enum Then {
    Nothing,
    /// Run the held calls and releases as usual.
    Flush(Vec<Held>),
    /// The window's plan cannot be built, and its kernels went with it: what its calls
    /// write carries `error`; then the releases.
    Fail {
        blobs: Vec<Counted<Blob>>,
        error: crate::Error,
        releases: Vec<Held>,
    },
    /// Run the plan on these blobs with these kernels, then the held releases.
    Launch {
        plan: Plan,
        inputs: Vec<Counted<Blob>>,
        outputs: Vec<Counted<Blob>>,
        kernels: Option<Vec<Option<StandIn>>>,
        /// What the run's own errors name.
        at: Caller,
        releases: Vec<Held>,
    },
}

impl Promotion {
    pub(crate) fn new(measured: bool) -> Self {
        Promotion {
            measured,
            ..Promotion::default()
        }
    }

    pub(crate) fn stats(&self) -> PromotionStats {
        PromotionStats {
            shed: self.shelf.shed_count(),
            ..self.state.lock().stats
        }
    }

    /// The plans compiled, as a cache of the engine's.
    pub(crate) fn shelf(&self) -> std::sync::Arc<shelf::Shelf> {
        self.shelf.clone()
    }

    /// Tests: windows take what `clock` says, by what is timed.
    #[cfg(test)]
    pub(crate) fn set_clock(&self, clock: fn(Timed) -> std::time::Duration) {
        self.state.lock().clock = Some(clock);
    }
}

impl Vm {
    /// Clears the flag that sends every `run` to [`Vm::promotion_interrupt`]: nothing is held.
    fn stop_holding(&self) {
        self.shared()
            .divert_flags
            .fetch_and(!PROMOTION_HOLDING, Ordering::Release);
    }

    /// A quiet window begins: calls go to no hook ([`Vm::promotion_op`], [`Vm::promotion_release`]),
    /// and unless a capture is in progress, cheap ones take the fast path of `run_op`.
    fn begin_quiet(&self) {
        let sh = self.shared();
        sh.divert_flags.fetch_and(!PROMOTION_ON, Ordering::Release);
        // Under the captures' lock: a capture that begins sets the flag again after this.
        let captures = sh.capture.lock();
        if captures.is_empty() {
            sh.submit_flags.fetch_and(!SUBMIT_SLOW, Ordering::Release);
        }
    }

    /// A quiet window ends: calls go to the hooks again.
    fn end_quiet(&self) {
        let sh = self.shared();
        sh.submit_flags.fetch_or(SUBMIT_SLOW, Ordering::Release);
        sh.divert_flags.fetch_or(PROMOTION_ON, Ordering::Release);
    }

    /// Gives automatic promotion a pass over the steps of each window it runs as a plan (an
    /// op layer's merging of elementwise kernels, say), so that a promoted loop gets what a
    /// compiled graph gets. Returns whether the pass is now this engine's: `false` with the
    /// switch off, or when the engine already has one (the first given stays).
    ///
    /// # Examples
    ///
    /// ```
    /// use eddy_vm::plan::{PlanPass, Step};
    /// let pass: PlanPass = std::sync::Arc::new(|_device, steps: Vec<Step>, _bytes| steps);
    /// let vm = eddy_vm::Vm::builder().promotion(true).build()?;
    /// assert!(vm.set_plan_pass(pass.clone()));
    /// assert!(!vm.set_plan_pass(pass.clone()));
    /// assert!(!eddy_vm::Vm::builder().promotion(false).build()?.set_plan_pass(pass));
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn set_plan_pass(&self, pass: PlanPass) -> bool {
        self.inner
            .promotion
            .as_ref()
            .is_some_and(|a| a.pass.set(pass).is_ok())
    }

    /// Whether automatic promotion is on and has a plan pass.
    ///
    /// # Examples
    ///
    /// ```
    /// let vm = eddy_vm::Vm::builder().promotion(true).build()?;
    /// assert!(!vm.has_plan_pass());
    /// vm.set_plan_pass(std::sync::Arc::new(|_device, steps, _bytes| steps));
    /// assert!(vm.has_plan_pass());
    /// # Ok::<(), eddy_vm::Error>(())
    /// ```
    pub fn has_plan_pass(&self) -> bool {
        self.inner
            .promotion
            .as_ref()
            .is_some_and(|a| a.pass.get().is_some())
    }

    /// What automatic promotion did on this engine; `None` with the switch off.
    ///
    /// # Examples
    ///
    /// See [`PromotionStats`].
    pub fn promotion_stats(&self) -> Option<PromotionStats> {
        self.inner.promotion.as_ref().map(|a| a.stats())
    }

    /// Notes a call, and holds it if the window is held: `Ok(None)`. Otherwise hands the
    /// kernel back to run as usual.
    #[cold]
    pub(crate) fn promotion_op<K: Kernel>(
        &self,
        promotion: &Promotion,
        stream: StreamId,
        kernel: K,
        inputs: &[&Counted<Blob>],
        outputs: &[&Counted<Blob>],
        at: Caller,
    ) -> Result<Option<K>> {
        if bypass() {
            return Ok(Some(kernel));
        }
        let _order = promotion.order.lock();
        let me = this_thread();
        let mut then = Then::Nothing;
        let held = {
            let mut st = promotion.state.lock();
            let st = &mut *st;
            let w = &mut st.window;
            if w.owner.is_some_and(|o| o != me) {
                // Another thread's call: the window ends here, unnoted.
                let old = std::mem::take(w);
                if old.quiet.is_some() {
                    self.end_quiet();
                }
                if old.holding && !old.held.is_empty() {
                    st.stats.fallbacks += 1;
                }
                then = Then::Flush(old.held);
                self.stop_holding();
            }
            let w = &mut st.window;
            w.owner = Some(me);
            let i = w.notes.calls.len();
            if w.quiet.is_some() {
                // (Reached only while a capture diverts calls; the window ended above
                // otherwise, and nothing is held.)
                return Ok(Some(kernel));
            }
            if i == 0 {
                // Skipping 0, which no window has.
                st.epoch = st.epoch.wrapping_add(1).max(1);
                w.epoch = st.epoch;
                st.spare.lend(w);
                w.reserve(st.last_calls);
            }
            w.note(kernel.name(), stream, inputs, outputs);
            let note = &w.notes.calls[i];
            let mut held = false;
            if w.holding {
                let seen = &st.seen;
                w.live.retain(|&c| seen[c].notes.calls.get(i) == Some(note));
                held = !w.live.is_empty();
                if !held {
                    // Diverged: what was held runs, then this call and the rest as usual.
                    self.stop_holding();
                    then = Then::Flush(st.give_up());
                }
            }
            let w = &mut st.window;
            if i == 0 && !w.holding {
                // A window that begins like a kind whose plan runs lose for now runs as that
                // kind would: eagerly. Its other calls are not noted (a call then costs what
                // it costs with the switch off); its end counts it as that kind.
                let first = &w.notes.calls[0];
                let eager_now = (st.seen.iter())
                    .find(|e| !e.profit.holds() && e.notes.calls.first() == Some(first));
                if let Some(e) = eager_now {
                    w.quiet = Some(e.id);
                    self.begin_quiet();
                }
            }
            held
        };
        self.promotion_then(then);
        if !held {
            return Ok(Some(kernel));
        }
        match Captured::checked(self.shared(), stream, kernel, inputs, outputs, at) {
            Ok(call) => {
                promotion.state.lock().window.held.push(Held::Op(call));
                Ok(None)
            }
            // The call fails as it would eagerly. Its note stays (the window's notes are its
            // calls'), so no plan can stand for what is held: that runs first, and the rest
            // of the window as usual.
            Err(e) => {
                let held = promotion.state.lock().give_up();
                self.stop_holding();
                self.promotion_then(Then::Flush(held));
                Err(e)
            }
        }
    }

    /// Holds a release of `blob` if calls are held by this thread: `true`. Notes a release of
    /// a blob made in the window either way.
    #[cold]
    #[inline(never)]
    pub(crate) fn promotion_release(&self, blob: &Counted<Blob>, unheld: bool) -> bool {
        let Some(promotion) = &self.inner.promotion else {
            return false;
        };
        // A quiet window notes nothing and holds nothing (see `promotion_op`).
        if bypass() || self.shared().divert_flags.load(Ordering::Relaxed) & PROMOTION_ON == 0 {
            return false;
        }
        // After any held calls another thread is submitting (one may write this blob).
        let _order = promotion.order.lock();
        let me = this_thread();
        let mut st = promotion.state.lock();
        let w = &mut st.window;
        let found = w.find(blob);
        if let Some(Found::Made(m)) = found {
            w.made[m].1 = true;
        }
        // A blob no held call touches is released at once: it comes after what ran before
        // the window, and no later call can name it. (The previous step's gradients, say: their
        // memory is free for this window's plan run.)
        if w.holding && w.owner == Some(me) && found.is_some() {
            w.held.push(Held::Release(blob.clone(), unheld));
            return true;
        }
        // Another thread's release of a blob the window knows: the calls held before it run
        // first, as they would have been submitted first (the window goes on unheld).
        if w.holding && !w.held.is_empty() && found.is_some() {
            let held = st.give_up();
            drop(st);
            self.stop_holding();
            self.promotion_then(Then::Flush(held));
        }
        false
    }

    /// A call taken by a capture or held by automatic promotion: `Ok(None)`; otherwise the
    /// kernel, handed back to run as usual.
    #[cold]
    #[inline(never)]
    pub(crate) fn divert<K: Kernel>(
        &self,
        stream: StreamId,
        kernel: K,
        inputs: &[&Counted<Blob>],
        outputs: &[&Counted<Blob>],
        at: Caller,
    ) -> Result<Option<K>> {
        let mut kernel = kernel;
        if self.shared().divert_flags.load(Ordering::Relaxed) & CAPTURES > 0 {
            match self.try_capture(stream, kernel, inputs, outputs, at)? {
                None => return Ok(None),
                Some(k) => kernel = k,
            }
        }
        match &self.inner.promotion {
            Some(promotion) => self.promotion_op(promotion, stream, kernel, inputs, outputs, at),
            None => Ok(Some(kernel)),
        }
    }

    /// Before any other instruction: what is held runs first (the window goes on unheld).
    #[cold]
    #[inline(never)]
    pub(crate) fn promotion_interrupt(&self) {
        let Some(promotion) = &self.inner.promotion else {
            return;
        };
        if bypass() {
            return;
        }
        let _order = promotion.order.lock();
        let held = {
            let mut st = promotion.state.lock();
            // Nothing held yet: what comes before the window's calls keeps its order anyway.
            if !st.window.holding || st.window.held.is_empty() {
                return;
            }
            self.stop_holding();
            st.give_up()
        };
        self.promotion_then(Then::Flush(held));
    }

    /// A host access by this thread: the window ends. When the window runs as a plan, returns
    /// the scheduler, taken before the run was submitted, for the access to run the passes
    /// with (`Vm::run_then_wait`): a scheduler thread woken by the submission would otherwise
    /// often take the run while this thread, about to wait for it, spins and then sleeps, and
    /// three threads would share two cores' worth of work.
    #[cold]
    pub(crate) fn promotion_boundary(&self, promotion: &Promotion) -> Option<SchedGuard<'_>> {
        if bypass() {
            return None;
        }
        let _order = promotion.order.lock();
        let me = this_thread();
        let (then, arm): (Then, Vec<usize>) = {
            let mut guard = promotion.state.lock();
            let st = &mut *guard;
            // A window whose access failed before it returned is not timed.
            st.pending = None;
            if st.window.owner != Some(me) {
                if st.window.quiet.is_some() {
                    // Another thread's host access ends a quiet window, uncounted.
                    st.window = Window::default();
                    self.end_quiet();
                    return None;
                }
                // Another thread's host access: what is held runs first.
                if !st.window.holding || st.window.held.is_empty() {
                    return None;
                }
                self.stop_holding();
                (Then::Flush(st.give_up()), Vec::new())
            } else if st.window.notes.calls.is_empty() {
                return None;
            } else {
                st.stats.windows += 1;
                let was_holding = st.window.holding;
                let quiet = st.window.quiet;
                let (notes, mut w) = st.window.close();
                self.stop_holding();
                let compiled = st.stats.compiled;
                let (known, then) = if let Some(id) = quiet {
                    // Its first call only is noted: it counts as the kind it began like (still
                    // remembered: kinds are forgotten only where the owner's windows end).
                    self.end_quiet();
                    st.stats.quiet += 1;
                    (st.seen.iter().position(|e| e.id == id), Then::Nothing)
                } else {
                    st.last_calls = notes.calls.len();
                    let known = st.seen.iter().position(|e| e.notes == notes);
                    let then = match known.filter(|c| w.live.contains(c)) {
                        // No plan run can win (nor is one compiled for it).
                        Some(c) if was_holding && st.held_calls_lose(c, me, promotion.measured) => {
                            Then::Flush(std::mem::take(&mut w.held))
                        }
                        Some(c) if was_holding => {
                            let State { seen, stats, .. } = &mut *st;
                            let pass = promotion.pass.get();
                            self.promotion_launch(
                                &mut seen[c],
                                stats,
                                &mut w,
                                pass,
                                &promotion.shelf,
                            )
                        }
                        _ => {
                            if was_holding {
                                st.stats.fallbacks += 1;
                            }
                            Then::Flush(std::mem::take(&mut w.held))
                        }
                    };
                    (known, then)
                };
                st.spare.keep(w);
                // Timed: windows run eagerly throughout, and plan runs of a plan compiled before.
                let promoted = matches!(then, Then::Launch { .. }) && st.stats.compiled == compiled;
                // Remembered, most recent last; the least recent (and its plan's arena) goes.
                let mut entry = match known {
                    Some(k) => {
                        st.spare.calls = notes.calls;
                        st.spare.calls.clear();
                        st.seen.remove(k)
                    }
                    None => {
                        st.next_id += 1;
                        Seen {
                            id: st.next_id,
                            one_stream: (notes.calls.windows(2))
                                .all(|c| c[0].stream == c[1].stream),
                            notes,
                            count: 0,
                            reuse: None,
                            profit: Profit::default(),
                        }
                    }
                };
                if !was_holding {
                    entry.profit.ran_eagerly();
                }
                let start = (st.last_done)
                    .filter(|&(t, _)| promotion.measured && t == me)
                    .map(|(_, at)| at);
                st.pending = start
                    .filter(|_| promoted || !was_holding)
                    .map(|start| Pending {
                        thread: me,
                        id: entry.id,
                        promoted,
                        start,
                    });
                if st.seen.len() >= REMEMBERED {
                    promotion.shelf.remove(st.seen.remove(0).id);
                }
                st.seen.push(Seen {
                    count: entry.count + 1,
                    ..entry
                });
                (then, st.holdable())
            }
        };
        // (A synchronous engine's submissions take the scheduler themselves.)
        let threaded = matches!(self.inner.mode, super::Mode::Threaded { .. });
        let held = (threaded && matches!(then, Then::Launch { .. }))
            .then(|| self.try_sched())
            .flatten();
        {
            let _held = held.is_some().then(crate::exec::SchedulerHeld::enter);
            self.promotion_then(then);
        }
        if !arm.is_empty() {
            let mut st = promotion.state.lock();
            // Unless another thread started a window meanwhile.
            if st.window.notes.calls.is_empty() && st.window.held.is_empty() {
                st.window = Window {
                    owner: Some(me),
                    holding: true,
                    live: arm,
                    ..Window::default()
                };
                self.shared()
                    .divert_flags
                    .fetch_or(PROMOTION_HOLDING, Ordering::Release);
            }
        }
        held
    }

    /// A host access by this thread returned: times the window it ended, if that is to be
    /// timed, and a kind whose plan runs lose is not held again for a while.
    #[cold]
    pub(crate) fn promotion_done(&self, promotion: &Promotion) {
        if !promotion.measured || bypass() {
            return;
        }
        let now = Instant::now();
        let me = this_thread();
        let mut guard = promotion.state.lock();
        let st = &mut *guard;
        st.last_done = Some((me, now));
        let Some(p) = st.pending.take_if(|p| p.thread == me) else {
            return;
        };
        let Some(k) = st.seen.iter().position(|e| e.id == p.id) else {
            return;
        };
        let took = now.saturating_duration_since(p.start);
        #[cfg(test)]
        let took = (st.clock).map_or(took, |c| {
            c(if p.promoted {
                Timed::Plan
            } else {
                Timed::Eager
            })
        });
        if !p.promoted {
            st.seen[k].profit.eager(took);
            return;
        }
        if st.seen[k].profit.plan(took) {
            st.stats.backed_off += 1;
        }
        // After a loss, or to time the kind's eager windows anew, it is not held for a while;
        // the next window may be held already, for this kind among others.
        if !st.seen[k].profit.holds() {
            let w = &st.window;
            if w.holding && w.held.is_empty() && w.notes.calls.is_empty() {
                let now = st.holdable();
                let w = &mut st.window;
                w.live.retain(|c| now.contains(c));
                if w.live.is_empty() {
                    w.holding = false;
                    self.stop_holding();
                }
            }
        }
    }
}
