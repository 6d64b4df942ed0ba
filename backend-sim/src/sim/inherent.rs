//! `SimVerbs`' own methods (beyond the trait): the seed, time, trace,
//! world access, introspection, and its `Drop` and `Default`.

use super::*;

impl SimVerbs {
    /// `sim_control`: the simulator's directives (time, faults, links,
    /// counters), the body of the trait method.
    pub(super) fn control(&mut self, cmd: SimCommand<'_, Self>) -> Result<SimReply> {
        match cmd {
            SimCommand::Now => Ok(SimReply::TimeNs(self.world.now_ns())),
            SimCommand::AdvanceNs(ns) => {
                let now = self.world.now_ns();
                if now.checked_add(ns).is_none_or(|t| t > TIME_HORIZON_NS) {
                    return Err(Error::invalid(
                        Verb::SimControl,
                        format!(
                            "advance: {ns} ns from {now} ns passes the virtual-time horizon of {TIME_HORIZON_NS} ns"
                        ),
                    ));
                }
                if !self.world.advance_ns(ns) {
                    return Err(Error::new(
                        Verb::SimControl,
                        ErrorKind::Busy,
                        format!(
                            "advance: still busy after the event bound (at {} ns; an endless retry loop?)",
                            self.world.now_ns()
                        ),
                    ));
                }
                Ok(SimReply::TimeNs(self.world.now_ns()))
            }
            SimCommand::RunUntilIdle => {
                if self.world.run_until_idle() {
                    Ok(SimReply::Ok)
                } else {
                    Err(Error::new(
                        Verb::SimControl,
                        ErrorKind::Busy,
                        format!(
                            "run_until_idle: still busy after the event bound (at {} ns; an endless RNR retry with rnr_retry=7?)",
                            self.world.now_ns()
                        ),
                    ))
                }
            }
            SimCommand::Fault {
                scope,
                action,
                when,
            } => {
                let scope = match scope {
                    FaultScope::All => None,
                    FaultScope::From(qp) => Some((true, *qp)),
                    FaultScope::To(qp) => Some((false, *qp)),
                };
                self.world.install_fault(scope, action, when)?;
                Ok(SimReply::Ok)
            }
            SimCommand::ClearFaults => {
                self.world.clear_faults();
                Ok(SimReply::Ok)
            }
            SimCommand::Link { device, port, up } => {
                self.world.set_link(device, port, up)?;
                Ok(SimReply::Ok)
            }
            SimCommand::Raw {
                name: "rnr_stalls", ..
            } => Ok(SimReply::Text(self.world.rnr_stalls().join("\n"))),
            SimCommand::Raw {
                name: "state_digest",
                ..
            } => Ok(SimReply::Text(format!(
                "{:#018x}",
                self.world.state_digest()
            ))),
            _ => Err(Error::not_implemented(
                Verb::SimControl,
                "this sim directive",
            )),
        }
    }

    /// A simulator built from `config`.
    pub fn new(config: SimConfig) -> Self {
        Self {
            world: World::new(config),
        }
    }

    /// A simulator of [`SimConfig::from_env`]: two ConnectX-6 devices and
    /// the seed of `VERBS_SIM_SEED` (0 when unset). If the thread panics
    /// while the simulator lives (a failing `#[test]`), its seed is printed
    /// to stderr: `VERBS_SIM_SEED=<n> cargo test <name>` replays the run.
    ///
    /// ```
    /// use backend_sim::SimVerbs;
    /// let sim = SimVerbs::from_env();
    /// assert_eq!(sim.seed(), backend_sim::SimConfig::seed_from_env().unwrap_or(0));
    /// ```
    pub fn from_env() -> Self {
        Self::new(SimConfig::from_env())
    }

    /// The root seed.
    pub fn seed(&self) -> u64 {
        self.world.seed()
    }

    /// Which check refused the remote access a completion polled from `cq`
    /// reports (`REM_ACCESS_ERR`, `REM_INV_REQ_ERR`): a bad rkey, an access
    /// past the region's end, a missing access flag, … Hardware gives only
    /// the status; the simulator knows which check failed. `None` for other
    /// completions, and once 16 newer refusals have been recorded.
    pub fn completion_cause(
        &self,
        cq: &CqHandle,
        wc: &Wc,
    ) -> Option<crate::datapath::protection::AccessCause> {
        if !crate::world::exec_may_have_cause(wc.status) {
            return None;
        }
        let device = self.world.cqs.get(cq.index, cq.generation)?.device;
        self.world.access_causes.find(device, wc.qp_num, wc.wr_id)
    }

    /// Virtual time in nanoseconds.
    pub fn now_ns(&self) -> u64 {
        self.world.now_ns()
    }

    /// The trace of everything that happened.
    pub fn trace(&self) -> &Trace {
        self.world.trace()
    }

    /// `ibv_post_send` of a chain with `IBV_WR_BIND_MW` requests (type 2
    /// windows), whose `wr.bind_mw` part the trait's `SendWr` does not
    /// carry; see [`World::post_send_with_binds`]. For the drop-in library.
    pub fn post_send_with_binds(
        &mut self,
        qp: &QpHandle,
        wrs: &[SendWr<'_, Self>],
        binds: &[(usize, MwHandle, u32, MwBindInfo<'_, Self>)],
    ) -> Result<()> {
        let qp = self.world.resolve_qp(*qp, Verb::PostSend)?;
        self.world.post_send_with_binds(qp, wrs, binds)
    }

    /// The world.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// What is alive in the world, by kind: contexts, PDs, CQs, channels,
    /// MRs and their bytes and pins, SRQs, QPs, AHs, MWs, XRC domains, DC
    /// connections, rdma_cm ids and channels, unacknowledged async events.
    /// After a complete teardown [`crate::LiveObjects::is_empty`] holds:
    ///
    /// ```
    /// use backend_sim::SimVerbs;
    /// use verbs_api::{ProcessId, Verbs};
    ///
    /// let mut sim = SimVerbs::default();
    /// let ctx = sim.open_device(0, ProcessId(0)).unwrap();
    /// let pd = sim.alloc_pd(&ctx).unwrap();
    /// assert_eq!(sim.live_objects().pds, 1);
    /// sim.dealloc_pd(&pd).unwrap();
    /// sim.close_device(&ctx).unwrap();
    /// assert!(sim.live_objects().is_empty(), "left: {}", sim.live_objects());
    /// ```
    pub fn live_objects(&self) -> crate::LiveObjects {
        self.world.live_objects()
    }

    /// Requesters parked in an endless RNR wait (`rnr_retry = 7` and no
    /// receive posted at the peer for seven tries), each described with
    /// the QP it waits on: why a poll loop would never end. Empty when no
    /// such wait exists. The trace records each as `RNR stall`, and the
    /// script runner adds them to an unsatisfied `poll_cq`.
    pub fn rnr_stalls(&self) -> Vec<String> {
        self.world.rnr_stalls()
    }

    /// The world, writable.
    pub fn world_mut(&mut self) -> &mut World {
        &mut self.world
    }

    /// `EBUSY` for an object the connection manager owns (destroyed by
    /// `rdma_destroy_qp` / with the last id, as on hardware).
    pub(super) fn cm_guard(&self, what: CmOwned, verb: Verb, name: &str) -> Result<()> {
        if self.world.cm_owned(what) {
            return Err(Error::new(
                verb,
                ErrorKind::Busy,
                format!(
                    "{name} belongs to librdmacm: rdma_destroy_qp / rdma_destroy_id release it"
                ),
            ));
        }
        Ok(())
    }

    pub(super) fn subject_to_element(&self, s: AsyncSubject) -> AsyncElement<Self> {
        match s {
            AsyncSubject::Qp(q) => AsyncElement::Qp(q),
            AsyncSubject::QpNum(n) => AsyncElement::QpNum(n),
            AsyncSubject::Cq(c) => AsyncElement::Cq(c),
            AsyncSubject::Srq(s) => AsyncElement::Srq(s),
            AsyncSubject::Port(p) => AsyncElement::Port(p),
            AsyncSubject::Device => AsyncElement::Device,
        }
    }
}

/// Writes `SimConfig::chrome_trace` if set; a failing test's simulator
/// says which seed it ran: the panic message comes first, then
/// `note: simulated run: VERBS_SIM_SEED=<n> replays it`.
impl Drop for SimVerbs {
    fn drop(&mut self) {
        if let Some(path) = self.world.config.chrome_trace.clone() {
            if let Err(e) = std::fs::write(&path, self.world.trace().to_chrome_json()) {
                eprintln!("verbsim: cannot write the trace to {}: {e}", path.display());
            }
        }
        if std::thread::panicking() {
            eprintln!(
                "note: simulated run: VERBS_SIM_SEED={} replays it (SimVerbs::from_env, verbsim run --seed)",
                self.world.seed()
            );
        }
    }
}

impl Default for SimVerbs {
    fn default() -> Self {
        Self::new(SimConfig::default())
    }
}
