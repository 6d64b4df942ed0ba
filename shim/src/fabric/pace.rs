//! Virtual time on the shared fabric: how it follows the wall clock, and
//! how far packets in flight may run ahead of it.
//!
//! With pace [`Pace::Wall`] the world's clock is the wall-clock time since
//! the fabric started, with one exception: when a process posts, the
//! packets of its request, the answer and the acknowledgement are run at
//! once, up to [`LEAD_NS`] ahead of the wall clock, instead of the fabric
//! waiting out each wire latency. Timers (transport retry, RNR, CQ
//! moderation, scripted actions) are never run before the wall clock
//! reaches them, and nothing scheduled after a pending timer runs before
//! it, so every timeout still lasts at least its real duration.

use backend_sim::SimVerbs;

/// How virtual time relates to the wall clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// Virtual time never runs ahead of the wall-clock time since the
    /// fabric started: timers (transport retry, RNR, CM) take their real
    /// duration, so a peer that is merely slow is not declared dead.
    Wall,
    /// Virtual time runs as fast as events allow (as in one process): the
    /// trace depends only on the order of the processes' calls, but a timer
    /// can expire while a peer process is still on its way.
    Virtual,
}

/// A timer closer than this (ns) is waited for without sleeping: the
/// world's events after a post are about a microsecond apart, and a sleep
/// that short costs a scheduler wake-up of tens of microseconds. The loop
/// polls its sockets without waiting until the event is due, and sleeps
/// otherwise (it never spins while idle: a spin that gave the CPU away
/// with `sched_yield` lost it for whole time slices to programs spinning
/// on their memory, as `ib_write_lat` does; 291 µs against 44 µs
/// measured).
pub(crate) const NEAR_NS: u64 = 20_000;

/// How far (ns) virtual time may run ahead of the wall clock to deliver
/// packets in flight (pace `Wall`): far more than a request's packets, its
/// answer and its acknowledgement take on the modelled wire (a few
/// microseconds), so a ping-pong's half round trip is handled in one
/// wake-up; small enough that a timer armed meanwhile (never run early)
/// is late by at most this much.
const LEAD_NS: u64 = 50_000;

/// Moves virtual time to `wall` (pace `Wall`) or runs what is runnable
/// (pace `Virtual`), and caps verbs at that time.
pub(crate) fn advance(sim: &mut SimVerbs, pace: Pace, wall: u64) {
    let w = sim.world_mut();
    match pace {
        Pace::Wall => {
            w.set_time_limit(Some(wall.max(w.now_ns())));
            let now = w.now_ns();
            let _ = w.advance_ns(wall.saturating_sub(now));
            // Packets in flight run now, up to LEAD_NS ahead of the
            // wall clock; timers still wait for it.
            let _ = w.run_packets_until(wall.saturating_add(LEAD_NS));
        }
        Pace::Virtual => {
            w.set_time_limit(None);
            let _ = w.run_until_idle();
        }
    }
}
