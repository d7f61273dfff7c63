//! Whether running a kind of window as a plan pays.
//!
//! A plan run saves the engine's work per call and merges kernels, but the window's calls are
//! held until its end, so they no longer overlap the computing of the calls before them. Where
//! the calls cost as much as the computing (small steps), holding them loses more than the
//! plan saves. So each kind of window keeps the wall times of its last few windows run
//! eagerly and of its last few run as plans, each from the end of the host access before it
//! to the end of its own (the time the thread that makes the calls spends on the window), and
//! goes back to eager execution for a while when its plan runs are slower. It tries again
//! after that many windows, one plan run judged with the runs before it, and waits twice as
//! long each time the plan loses again. Two blatant cases lose at once: a plan run over twice
//! as slow as the eager windows before three are timed, and a held window whose calls alone
//! took longer than an eager window. While the plan wins, the eager times it is judged by age
//! (the first ones are often taken while the process warms up, or while the calls were still
//! noted), so after 8 winning runs, then 16, and so on up to 1,024, the kind's next two
//! windows run eagerly and replace them.

use std::time::Duration;

/// How many recent times of each way a kind keeps.
const KEEP: usize = 5;
/// Plan runs timed before the first verdict; each one after it is judged with those before.
const TRIES: usize = 3;
/// Plan runs lose when their median is above the eager median by more than this share.
const MARGIN: f64 = 0.02;
/// Before the first verdict, a plan run more than this many times slower than the eager
/// windows loses at once (two more such runs would cost more than the verdict is worth).
const BLATANT: f64 = 2.0;
/// Windows run eagerly after the first loss, and the most after repeated ones.
const FIRST_BACKOFF: u32 = 8;
const MOST_BACKOFF: u32 = 1024;
/// Eager windows that replace the eager times, once the plan has won for a while.
const RETIME: u32 = 2;

/// The last few times of one way of running a kind of window, oldest first.
#[derive(Clone, Debug, Default)]
struct Times(smallvec::SmallVec<[Duration; KEEP]>);

impl Times {
    fn push(&mut self, d: Duration) {
        if self.0.len() == KEEP {
            self.0.remove(0);
        }
        self.0.push(d);
    }

    /// The median; of an even count, the lower middle one (of a kind's first two eager
    /// windows, the first often runs on cold caches).
    fn median(&self) -> Option<Duration> {
        let mut v = self.0.clone();
        v.sort_unstable();
        v.get(v.len().saturating_sub(1) / 2).copied()
    }
}

/// What a kind of window's times say about running it as a plan.
#[derive(Clone, Debug, Default)]
pub(super) struct Profit {
    eager: Times,
    plan: Times,
    /// Eager windows still to run before the plan is tried again.
    skip: u32,
    /// How many windows the next loss sends back to eager execution.
    backoff: u32,
    /// Plan runs that won since the eager times were last taken anew, and how many more
    /// there will be before the next time (0: the first interval).
    wins: u32,
    retime_after: u32,
}

impl Profit {
    /// Whether the kind's next window may be held to run as a plan.
    pub(super) fn holds(&self) -> bool {
        self.skip == 0
    }

    /// A window of the kind ended that ran eagerly: one fewer to wait for.
    pub(super) fn ran_eagerly(&mut self) {
        self.skip = self.skip.saturating_sub(1);
    }

    /// The time of a window that ran eagerly.
    pub(super) fn eager(&mut self, d: Duration) {
        self.eager.push(d);
    }

    /// The time of a window that ran as a plan. Returns `true` when the plan runs lose: the
    /// kind's next windows run eagerly (see [`holds`](Self::holds)).
    pub(super) fn plan(&mut self, d: Duration) -> bool {
        self.plan.push(d);
        let (Some(p), Some(e)) = (self.plan.median(), self.eager.median()) else {
            return false;
        };
        if self.plan.0.len() < TRIES {
            let blatant = d.as_secs_f64() > e.as_secs_f64() * BLATANT;
            if blatant {
                self.lose();
            }
            return blatant;
        }
        if slower(p, e) {
            self.lose();
            return true;
        }
        self.backoff = FIRST_BACKOFF;
        self.wins += 1;
        if self.wins >= self.retime_after.max(FIRST_BACKOFF) {
            // The next windows run eagerly, to be judged by times taken now.
            self.retime_after = (self.wins * 2).min(MOST_BACKOFF);
            self.wins = 0;
            self.eager.0.clear();
            self.skip = RETIME;
        }
        false
    }

    /// The time a held window took until its end, before anything ran: its calls alone.
    /// Returns `true` when that is more than an eager window takes: no plan run can win, so
    /// the window runs eagerly after all, and so do the kind's next windows, as after lost
    /// plan runs (a window of small steps loses this way before its plan is compiled).
    pub(super) fn held_calls(&mut self, d: Duration) -> bool {
        let lost = self.eager.median().is_some_and(|e| slower(d, e));
        if lost {
            self.lose();
        }
        lost
    }

    /// The kind's plan found no room on its device (it ran eagerly after all): it runs
    /// eagerly for a while, as after lost plan runs, before its plan is tried again.
    pub(super) fn no_room(&mut self) {
        self.lose();
    }

    /// The kind runs eagerly for a while, twice as long as the last time.
    fn lose(&mut self) {
        self.skip = self.backoff.max(FIRST_BACKOFF);
        self.backoff = (self.skip * 2).min(MOST_BACKOFF);
        (self.wins, self.retime_after) = (0, 0);
    }
}

/// Whether `d` is slower than `eager` by more than the margin.
fn slower(d: Duration, eager: Duration) -> bool {
    d.as_secs_f64() > eager.as_secs_f64() * (1.0 + MARGIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn plan_runs_as_fast_as_eager_windows_go_on() {
        let mut p = Profit::default();
        p.eager(us(100));
        p.eager(us(104));
        // Each interval between two timings of eager windows anew: plan runs in a row.
        let mut runs = Vec::new();
        let mut n = 0;
        for _ in 0..200 {
            assert!(!p.plan(us(101)));
            n += 1;
            if !p.holds() {
                runs.push(n);
                n = 0;
                assert_eq!(wait(&mut p), RETIME);
            }
        }
        // The first three are timed before a verdict: the wins count from the third.
        assert_eq!(runs, [10, 16, 32, 64]);
    }

    /// Eager times taken early (slow) make a plan run look fast; after a while they are taken
    /// anew, and the plan that loses against them goes back to eager windows.
    #[test]
    fn eager_times_are_taken_anew_while_the_plan_wins() {
        let mut p = Profit::default();
        p.eager(us(200));
        p.eager(us(220));
        let mut won = 0;
        while p.holds() {
            assert!(!p.plan(us(100)));
            won += 1;
        }
        assert_eq!(won, TRIES as u32 - 1 + FIRST_BACKOFF);
        for _ in 0..RETIME {
            p.ran_eagerly();
            p.eager(us(50));
        }
        assert!(p.holds());
        assert!(p.plan(us(100)), "judged by the times taken anew");
        assert_eq!(wait(&mut p), FIRST_BACKOFF);
    }

    /// Drains a wait: how many eager windows it took.
    fn wait(p: &mut Profit) -> u32 {
        let mut n = 0;
        while !p.holds() {
            p.ran_eagerly();
            p.eager(us(100));
            n += 1;
        }
        n
    }

    #[test]
    fn slower_plan_runs_go_back_to_eager_windows_for_longer_each_time() {
        let mut p = Profit::default();
        p.eager(us(100));
        assert!(!p.plan(us(150)));
        assert!(!p.plan(us(150)), "two runs are too few to judge");
        assert!(p.plan(us(150)));
        let mut waits = Vec::new();
        for _ in 0..3 {
            waits.push(wait(&mut p));
            assert!(
                p.plan(us(150)),
                "a try after a wait is judged with the runs before"
            );
        }
        assert_eq!(waits, [8, 16, 32]);
    }

    #[test]
    fn faster_tries_win_back_and_the_wait_starts_over() {
        let mut p = Profit::default();
        p.eager(us(100));
        for _ in 0..3 {
            p.plan(us(200));
        }
        // The plan got faster: each try counts, and the third makes the median.
        wait(&mut p);
        assert!(p.plan(us(90)));
        wait(&mut p);
        assert!(p.plan(us(90)));
        wait(&mut p);
        assert!(!p.plan(us(90)));
        assert!(p.holds());
        assert!(!p.plan(us(500)), "one slow run among fast ones");
        let mut tries = 1;
        while !p.plan(us(200)) {
            tries += 1;
        }
        assert_eq!(tries, 2, "slow runs the most of the last five");
        assert_eq!(
            wait(&mut p),
            FIRST_BACKOFF,
            "after a win the wait starts over"
        );
    }

    #[test]
    fn a_first_run_over_twice_as_slow_as_eager_windows_loses_at_once() {
        let mut p = Profit::default();
        p.eager(us(100));
        assert!(!p.plan(us(200)), "twice as slow: judged with the next ones");
        assert!(p.plan(us(201)), "before three runs are timed");
        assert_eq!(wait(&mut p), FIRST_BACKOFF);
        // Less slow: the verdict waits for the third run.
        let mut p = Profit::default();
        p.eager(us(100));
        assert!(!p.plan(us(150)));
        assert!(!p.plan(us(150)));
        assert!(p.plan(us(150)));
        // With three runs timed, one slow run is judged with the others.
        let mut p = Profit::default();
        p.eager(us(100));
        for _ in 0..3 {
            assert!(!p.plan(us(90)));
        }
        assert!(!p.plan(us(1_000)), "one slow run among fast ones");
    }

    #[test]
    fn held_calls_slower_than_an_eager_window_lose_at_once() {
        let mut p = Profit::default();
        assert!(!p.held_calls(us(500)), "no eager time to judge by");
        p.eager(us(100));
        assert!(!p.held_calls(us(101)), "within the margin");
        assert!(p.held_calls(us(150)));
        assert_eq!(wait(&mut p), FIRST_BACKOFF);
        assert!(p.held_calls(us(150)));
        assert_eq!(wait(&mut p), 2 * FIRST_BACKOFF, "each loss waits longer");
    }

    #[test]
    fn without_eager_times_there_is_no_verdict() {
        let mut p = Profit::default();
        for _ in 0..10 {
            assert!(!p.plan(us(1_000)));
        }
        assert!(p.holds());
    }

    #[test]
    fn the_wait_stops_growing() {
        let mut p = Profit::default();
        p.eager(us(100));
        for _ in 0..TRIES {
            p.plan(us(1_000));
        }
        let mut last = 0;
        for _ in 0..12 {
            last = wait(&mut p);
            assert!(p.plan(us(1_000)));
        }
        assert_eq!(last, MOST_BACKOFF);
    }
}
