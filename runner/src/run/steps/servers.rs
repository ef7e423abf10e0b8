//! Both sides' servers of one model: started when a step first needs one, both up at once on
//! disjoint GPUs when the node has room, else one at a time (the other side's stopped, or its
//! memory released through its memory API, to make room, a release counting only when
//! readings of its GPUs show them freed, and idle once it is paused); each start's log window
//! kept for the routing check, and how the servers shared the node for the GPU-time file.
//!
//! What it leaves to others: starting and stopping one server (`crate::run::server`), the
//! memory API and the reading after a release (`crate::run::memory`), which steps need a server
//! (`served`).

use std::time::Duration;

use prgate_gate::evidence::{Check, NotRunReason, Side};
use prgate_gate::speed::blocks;

use crate::container::NetworkSide;
use crate::gpu_time::{ServerDesign, ServersUsed};
use crate::preflight::SystemCommands;
use crate::recipe::memory_api::MemoryApiKey;
use crate::recipe::{Recipe, RoutingLogged};
use crate::results::{EventKind, StepId, event_server, now_ms};
use crate::run::PreflightMode;
use crate::run::RunError;
use crate::run::StepFailure;
use crate::run::emit::ServerEvents;
use crate::run::exec::Exec;
use crate::run::memory::{self, Freed, MemoryApi, ReleaseCheck};
use crate::run::server::{Launch, LogWindow, RoutingRead, Server};
use crate::schedule::cost::Layout;

use super::{ModelJob, Runner, SERVED_MODEL, side_name, slot};

impl<'r> Runner<'r> {
    /// Both sides' servers of a model, none started yet: both up at once on disjoint GPUs of
    /// `gpus` when the node has room, else one at a time on the same GPUs. A side whose install
    /// failed has no server.
    pub(super) fn servers<'a>(
        &mut self,
        job: &'a ModelJob<'_>,
        recipe: &'a Recipe,
        gpus: &'a [u32],
    ) -> Result<Servers<'a>, RunError>
    where
        'r: 'a,
    {
        let tp = (recipe.tp() as usize).min(gpus.len());
        // A topology has the nodes to itself: base's and PR's run in turn.
        let node_gpus = u32::try_from(gpus.len()).ok();
        let together = Layout::of(node_gpus, recipe) == Layout::Together;
        let gpu_sets =
            if together { [&gpus[..tp], &gpus[tp..2 * tp]] } else { [&gpus[..tp], &gpus[..tp]] };
        let mut launches = Vec::new();
        let mut slots = [Slot::Idle, Slot::Idle];
        for side in [Side::Base, Side::Pr] {
            let tree = job.server_tree(side);
            if let Err(failure) = self.install_side(job, recipe, side, tree) {
                slots[slot(side)] = Slot::Failed(failure);
            }
            let routing = StepId::new(Some(job.name()), Check::Routing, side, None);
            let log = self.results.step_log_dir(&routing)?.join("server.log");
            launches.push(Launch {
                tree,
                // The baseline of a model new in the PR is SGLang's own path.
                monokernel: side == Side::Pr || !job.model.new,
                gpus: gpu_sets[slot(side)],
                env: self.exec.side_env(tree),
                log,
                purpose: format!("{}-{}-server", job.name(), side_name(side)),
                // Each side's servers on a network of their own: the PR's cannot reach base's.
                side: if side == Side::Base { NetworkSide::Base } else { NetworkSide::Pr },
            });
        }
        let recipes = [job.side_recipe(recipe, Side::Base), Ok(recipe)];
        let keys =
            recipes.each_ref().map(|side| side.as_ref().ok().map(|own| own.server().memory_api));
        let declared = keys.map(|key| key.map_or((None, false), memory::declared));
        let release_check = match self.request.preflight {
            PreflightMode::On { root, .. } => ReleaseCheck::Read {
                node: self.request.inputs.node,
                root,
                commands: SystemCommands::new(&self.results.root().join("logs/release-check")),
            },
            PreflightMode::Off => ReleaseCheck::Off,
        };
        Ok(Servers {
            recipe,
            recipes,
            launches,
            slots,
            together,
            served: [Vec::new(), Vec::new()],
            model: job.name().to_owned(),
            events: self.emit.servers(),
            apis: declared.map(|(api, _)| api),
            no_api: declared.map(|(_, none)| none),
            no_pause: [None, None],
            release_check,
            not_freed: [None, None],
            unread_releases: false,
            paused: [false, false],
            keys,
            loads: [0, 0],
            wakes: [0, 0],
        })
    }
}

/// A server's address, as the steps that use it need it.
#[derive(Debug, Clone)]
pub(super) struct Serving {
    /// Where prgate reaches it: `http://127.0.0.1:<port>`.
    pub url: String,
    /// The port it listens on, as a command that joins it sees it.
    pub port: u16,
    /// Its container, which such a command joins (`None` on the host).
    pub container: Option<String>,
}

/// A side's server: not started (or stopped to make room), up, loaded but its memory released
/// to make room, or failed for good.
#[derive(Debug)]
pub(super) enum Slot {
    Idle,
    Up(Server),
    Released(Server),
    Failed(StepFailure),
}

/// Both sides' servers of one model.
pub(super) struct Servers<'a> {
    /// The PR's recipe: what is measured (lengths, timeouts, the checkpoint).
    pub(super) recipe: &'a Recipe,
    /// What each side runs (base, PR): the base side's commands come from its own recipe, and
    /// a base side without one has none ([`ModelJob::side_recipe`]).
    recipes: [Result<&'a Recipe, StepFailure>; 2],
    /// How each side's server starts: base, PR.
    pub(super) launches: Vec<Launch<'a>>,
    pub(super) slots: [Slot; 2],
    /// Both up at once (on disjoint GPUs), else one at a time.
    pub(super) together: bool,
    /// Together: which side's server is paused while the other side is measured.
    paused: [bool; 2],
    /// Each side's starts that became healthy in this run, where they wrote in its log.
    pub(super) served: [Vec<LogWindow>; 2],
    /// The model, which its servers' events name.
    pub(super) model: String,
    /// Where its loads (and wakes and releases) are told.
    pub(super) events: ServerEvents<'a>,
    /// Each side's memory API, once a release found it; `no_api` once a probe found none.
    apis: [Option<MemoryApi>; 2],
    no_api: [bool; 2],
    /// Why a side's released server could not be paused: from then on it is stopped to make
    /// room, and loaded again (the blocked design, whose words say why).
    no_pause: [Option<String>; 2],
    /// How a release is checked: the GPUs read after it, or not (the preflight is off).
    release_check: ReleaseCheck<'a>,
    /// Why a side's release did not count (its GPUs still held, still busy once it was paused,
    /// or not readable), in the design's words: from then on it is stopped to make room, and
    /// loaded again.
    not_freed: [Option<String>; 2],
    /// Whether a release counted without a reading (the preflight is off), which the design's
    /// words say.
    unread_releases: bool,
    /// What each side's recipe says of its memory API (`server.memory-api`); `None` for a side
    /// without a recipe.
    keys: [Option<MemoryApiKey>; 2],
    /// Each side's loads and wakes so far.
    loads: [u32; 2],
    wakes: [u32; 2],
}

impl<'a> Servers<'a> {
    /// The recipe `side` runs, or why it has none: never the PR's on the base side.
    pub(super) fn side_recipe(&self, side: Side) -> Result<&'a Recipe, StepFailure> {
        self.recipes[slot(side)].clone()
    }

    /// What `side`'s routing check reads: its recipe, log and measured starts, and on the PR
    /// side base's server command when the PR's differs from it; why not when `side` has no
    /// recipe.
    pub(super) fn routing_read<'s>(
        &'s self,
        side: Side,
        pattern: &'s str,
    ) -> Result<RoutingRead<'s>, StepFailure> {
        let at = slot(side);
        let recipe = self.side_recipe(side)?;
        let base = self.side_recipe(Side::Base).ok().map(|base| base.server().command_text());
        let base_command =
            base.filter(|base| side == Side::Pr && recipe.server().command_text() != *base);
        Ok(RoutingRead {
            recipe,
            log: &self.launches[at].log,
            pattern,
            windows: match recipe.server().routing_logged {
                RoutingLogged::Serving => &self.served[at],
                RoutingLogged::Any => std::slice::from_ref(&LogWindow::WHOLE),
            },
            base_command,
        })
    }

    /// `side`'s server, started when it is idle (one at a time: the other side's is stopped
    /// first). A server whose process has exited, or that once failed to start, is failed for
    /// good.
    pub(super) fn get(
        &mut self,
        exec: &Exec<'_>,
        side: Side,
        startup: Duration,
    ) -> Result<Serving, StepFailure> {
        let at = slot(side);
        if self.together {
            self.resume(at);
            self.pause_idle(1 - at);
        }
        if let Slot::Up(server) = &mut self.slots[at]
            && server.exited()
        {
            let detail = format!(
                "the server exited while it was in use\nlast lines of its log:\n{}",
                server.log_tail()
            );
            self.slots[at] = Slot::Failed(StepFailure::crash(detail));
        }
        if matches!(self.slots[at], Slot::Idle | Slot::Released(_)) && !self.together {
            self.make_room(1 - at);
        }
        if matches!(self.slots[at], Slot::Released(_)) {
            self.wake(side);
        }
        if matches!(self.slots[at], Slot::Idle) {
            let began = now_ms();
            let started = self
                .side_recipe(side)
                .and_then(|recipe| Server::start(recipe, exec, &self.launches[at], startup));
            let failure = started.as_ref().err().map(|failure| failure.reason);
            let model = Some(self.model.as_str());
            self.events.emit(&event_server(EventKind::ServerStarted, model, side, began, failure));
            self.slots[at] = match started {
                Ok(server) => {
                    self.served[at].push(server.window);
                    self.loads[at] += 1;
                    Slot::Up(server)
                }
                Err(failure) => Slot::Failed(failure),
            };
        }
        match &self.slots[at] {
            Slot::Up(server) => Ok(Serving {
                url: server.url.clone(),
                port: server.port,
                container: server.container(),
            }),
            Slot::Failed(failure) => Err(failure.clone()),
            Slot::Idle | Slot::Released(_) => Err(StepFailure {
                reason: NotRunReason::Other,
                detail: "the server was not started".to_owned(),
            }),
        }
    }

    /// Makes room on the GPUs by the `other` side's server, when it is up: its memory released
    /// when it speaks an engine's memory API (found by probing at its first release), and the
    /// server paused once readings of its GPUs show the release freed them
    /// ([`Servers::freed_and_paused`]: an idle server does nothing while the other side is
    /// measured, so a PR's server cannot load base's server then, and its GPUs must read idle
    /// once it is paused, so that no work it queued before keeps them busy); else stopped
    /// (dropping it lets its GPUs go); a released server that cannot be paused is stopped too,
    /// as is one whose release did not free its GPUs or left them busy; from then on its side
    /// is switched by reloads (the blocked design, which [`Servers::used`] says).
    /// A server that has exited is dropped without a probe: a dead server answers no API,
    /// which says nothing of the API its engine speaks.
    fn make_room(&mut self, other: usize) {
        match std::mem::replace(&mut self.slots[other], Slot::Idle) {
            Slot::Up(mut server)
                if !server.is_topology()
                    && !self.no_api[other]
                    && self.no_pause[other].is_none()
                    && self.not_freed[other].is_none() =>
            {
                if server.exited() {
                    return;
                }
                let began = now_ms();
                let Some(api) = memory::release(&server.url, self.apis[other]) else {
                    self.no_api[other] = true;
                    return;
                };
                self.apis[other] = Some(api);
                if let Some(server) = self.freed_and_paused(other, server) {
                    let model = Some(self.model.as_str());
                    let side = if other == 0 { Side::Base } else { Side::Pr };
                    let event = event_server(EventKind::ServerReleased, model, side, began, None);
                    self.events.emit(&event);
                    self.slots[other] = Slot::Released(server);
                }
            }
            Slot::Up(_stopped) => {}
            kept => self.slots[other] = kept,
        }
    }

    /// The `other` side's released server, paused, when its release freed its GPUs: they are
    /// read before the pause (a paused server cannot finish freeing) and again after it (a
    /// frozen server takes nothing back, so a server that freed its memory for the first reading
    /// and took it back before its pause is caught; and it queues nothing more, so GPUs still
    /// busy run work it queued before, which would slow the other side: they must read idle).
    /// `None` when the release did not count or the server could not be paused: the server is
    /// dropped (stopped, its queued work with it, and loaded again when its side needs it), and
    /// why is kept for the design's words.
    fn freed_and_paused(&mut self, other: usize, mut server: Server) -> Option<Server> {
        let gpus = self.launches[other].gpus;
        let found = self.release_check.after_release(gpus);
        let kept = "answered the memory release but kept its GPU memory";
        if let Some(why) = self.not_freed_words(other, found, kept) {
            self.not_freed[other] = Some(why);
            return None;
        }
        if let Err(failure) = server.set_paused(true) {
            self.no_pause[other] = Some(failure.detail);
            return None;
        }
        let found = self.release_check.once_paused(gpus);
        let took_back = "took its GPU memory back after its release";
        if let Some(why) = self.not_freed_words(other, found, took_back) {
            self.not_freed[other] = Some(why);
            return None;
        }
        Some(server)
    }

    /// What a reading of the `other` side's GPUs after its release (`found`) says in the
    /// design's words: `None` when the release counts (or the GPUs are not read because the
    /// preflight is off: counted, and said), else why not (`kept` says what the server did
    /// when its GPUs' memory was still held).
    fn not_freed_words(&mut self, other: usize, found: Freed, kept: &str) -> Option<String> {
        let side = if other == 0 { "base" } else { "PR" };
        match found {
            Freed::Yes => None,
            Freed::Unread => {
                self.unread_releases = true;
                None
            }
            Freed::Kept(held) => Some(format!("the {side} server {kept} ({held})")),
            Freed::Busy(busy) => Some(format!(
                "the {side} server kept its GPUs busy after its release, with work queued before its pause ({busy})"
            )),
            Freed::Unreadable(why) => Some(format!(
                "the {side} server's memory release could not be checked, its GPUs' memory unreadable ({why})"
            )),
            Freed::ActivityUnreadable(why) => Some(format!(
                "the {side} server's memory release could not be checked, its GPUs' activity unreadable ({why})"
            )),
        }
    }

    /// Together on one node: the `other` side's server, idle while this side is measured, is
    /// paused ([`Server::set_paused`]), so that it does nothing meanwhile (a PR server cannot
    /// load the host, its memory or the links base's run shares). One that cannot be paused
    /// keeps running, and the design's words say why ([`Servers::used`]).
    fn pause_idle(&mut self, other: usize) {
        if self.paused[other] || self.no_pause[other].is_some() {
            return;
        }
        if let Slot::Up(server) = &mut self.slots[other] {
            match server.set_paused(true) {
                Ok(()) => self.paused[other] = true,
                Err(failure) => self.no_pause[other] = Some(failure.detail),
            }
        }
    }

    /// Together: `at`'s server resumed when [`Servers::pause_idle`] paused it; one that cannot
    /// be resumed has failed for good.
    fn resume(&mut self, at: usize) {
        if !std::mem::take(&mut self.paused[at]) {
            return;
        }
        if let Slot::Up(server) = &mut self.slots[at]
            && let Err(failure) = server.set_paused(false)
        {
            let detail = format!(
                "the server could not be resumed after it was paused while the other side was measured: {}",
                failure.detail
            );
            self.slots[at] = Slot::Failed(StepFailure::crash(detail));
        }
    }

    /// Resumes `side`'s released (and paused) server, wakes it and warms it up; one that does
    /// not come back is stopped, to be loaded again.
    fn wake(&mut self, side: Side) {
        let at = slot(side);
        let Slot::Released(mut server) = std::mem::replace(&mut self.slots[at], Slot::Idle) else {
            return;
        };
        let began = now_ms();
        let api = self.apis[at].unwrap_or(MemoryApi::Sglang);
        let woke = server.set_paused(false).is_ok()
            && memory::wake(&server.url, api, SERVED_MODEL)
            && !server.exited();
        let failure = (!woke).then_some(NotRunReason::Crash);
        let model = Some(self.model.as_str());
        self.events.emit(&event_server(EventKind::ServerWoken, model, side, began, failure));
        if woke {
            self.wakes[at] += 1;
            self.slots[at] = Slot::Up(server);
        }
    }

    /// The runs of a block: [`blocks::BLOCK_RUNS`] one at a time when a switch reloads a
    /// server (a side's is known to speak no memory API, could not be paused while idle, or
    /// did not free its GPUs (or left them busy) at a release, or the model is a topology,
    /// whose servers are stopped): the blocked design; else one.
    pub(super) fn block_runs(&self) -> usize {
        let reloads = self.no_api.iter().any(|&none| none)
            || self.no_pause.iter().any(Option::is_some)
            || self.not_freed.iter().any(Option::is_some)
            || self.recipe.topology().is_some();
        if !self.together && reloads { blocks::BLOCK_RUNS } else { 1 }
    }

    /// Which design ran, what it took and why, for the GPU-time file and the comment; `None`
    /// when no server was loaded (none was needed, or none came up).
    pub(super) fn used(&self) -> Option<ServersUsed> {
        let loads = self.loads[0] + self.loads[1];
        let wakes = self.wakes[0] + self.wakes[1];
        if loads == 0 {
            return None;
        }
        let block_runs = u32::try_from(self.block_runs()).unwrap_or(u32::MAX);
        let side_name = |at: usize| if at == 0 { "base" } else { "PR" };
        let (design, why) = if self.together {
            let why = match [1, 0].into_iter().find_map(|at| Some((at, self.no_pause[at].as_deref()?))) {
                Some((at, error)) => format!(
                    "the node has GPUs for both servers at once; the idle {} server could not be paused ({}), so it kept running while the other side was measured",
                    side_name(at),
                    prgate_scope::text::clip(error, 200)
                ),
                None => "the node has GPUs for both servers at once; the idle one is paused while the other is measured".to_owned(),
            };
            (ServerDesign::Together, why)
        } else if self.recipe.topology().is_some() {
            (ServerDesign::Blocked, "a topology's servers are stopped and loaded again".to_owned())
        } else if let Some(at) =
            [0, 1].into_iter().find(|&at| self.keys[at] == Some(MemoryApiKey::None))
        {
            let why = format!("{}'s recipe says server.memory-api = \"none\"", side_name(at));
            (ServerDesign::Blocked, why)
        } else if let Some(at) = [1, 0].into_iter().find(|&at| self.no_api[at]) {
            // One at a time, the PR's server is released (probed) first.
            let why = match self.keys[at] {
                Some(key @ (MemoryApiKey::Sglang | MemoryApiKey::Vllm)) => format!(
                    "the {} server refused the {} memory API its recipe names",
                    side_name(at),
                    key.name()
                ),
                _ => format!(
                    "the {} server answered neither SGLang's nor vLLM's memory API",
                    side_name(at)
                ),
            };
            (ServerDesign::Blocked, why)
        } else if let Some(why) = [1, 0].into_iter().find_map(|at| self.not_freed[at].as_deref()) {
            (ServerDesign::Blocked, format!("{why}, so it is stopped to make room"))
        } else if let Some((at, error)) =
            [1, 0].into_iter().find_map(|at| Some((at, self.no_pause[at].as_deref()?)))
        {
            let why = format!(
                "the {} server could not be paused while idle ({}), so it is stopped to make room",
                side_name(at),
                prgate_scope::text::clip(error, 200)
            );
            (ServerDesign::Blocked, why)
        } else {
            let at = if self.apis[0].is_some() { 0 } else { 1 };
            let design = match self.apis[at] {
                Some(MemoryApi::Vllm) => ServerDesign::Vllm,
                _ => ServerDesign::Sglang,
            };
            let why = match self.keys[at] {
                Some(key @ (MemoryApiKey::Sglang | MemoryApiKey::Vllm)) => format!(
                    "{}'s recipe says server.memory-api = \"{}\"",
                    side_name(at),
                    key.name()
                ),
                _ if self.apis[at].is_some() => {
                    format!("the {} server answered that memory API", side_name(at))
                }
                _ => "no switch needed a memory API".to_owned(),
            };
            (design, why)
        };
        let why = if self.unread_releases {
            format!(
                "{why}; no release was checked against the GPUs' memory and activity: the preflight is off"
            )
        } else {
            why
        };
        let switches = (loads + wakes).saturating_sub(1);
        Some(ServersUsed { design, loads, wakes, switches, block_runs, why })
    }

    /// The failure of a run on `side`'s server, as the run failed; when the server's process
    /// has exited, the server crashed: the run is its crash, and the server is failed for good.
    pub(super) fn failure(&mut self, side: Side, failure: StepFailure) -> StepFailure {
        let at = slot(side);
        if let Slot::Up(server) = &mut self.slots[at]
            && server.exited()
        {
            let crash = StepFailure::crash(failure.detail);
            self.slots[at] = Slot::Failed(crash.clone());
            return crash;
        }
        failure
    }
}
