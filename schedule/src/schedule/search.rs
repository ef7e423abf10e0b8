//! The scheduling itself, on whole seconds: the lower bound, LPT, the local search and the
//! exact search. See docs/schedule.md for why each step and each bound holds.

use super::{BoundBasis, EXACT_SEARCH_BUDGET, Method};

/// The jobs to place, in whole seconds.
pub(super) struct Problem<'a> {
    /// Every job's time, by job index.
    pub(super) times: &'a [u64],
    /// The nodes each job may run on, ascending, by job index.
    pub(super) eligible: &'a [Vec<usize>],
    /// The jobs to place: those with an eligible node.
    pub(super) jobs: &'a [usize],
    pub(super) nodes: usize,
}

/// An assignment: the node of each of [`Problem::jobs`], in its order.
pub(super) struct Found {
    pub(super) assignment: Vec<usize>,
    pub(super) optimal: bool,
}

/// The largest of the lower bounds in docs/schedule.md, and its argument.
pub(super) fn lower_bound(problem: &Problem<'_>) -> (u64, BoundBasis) {
    let mut best = (0, BoundBasis::Nothing);
    let mut consider = |value: u64, basis: BoundBasis| {
        if value > best.0 {
            best = (value, basis);
        }
    };
    for &job in problem.jobs {
        consider(problem.times[job], BoundBasis::LongestJob { job });
    }
    // Every set of nodes some job is confined to, and all the nodes.
    let mut classes: Vec<Vec<usize>> = vec![(0..problem.nodes).collect()];
    for &job in problem.jobs {
        if !classes.contains(&problem.eligible[job]) {
            classes.push(problem.eligible[job].clone());
        }
    }
    // A job, plus what the node it goes to runs anyway: the jobs that only that node can run.
    let mut forced = vec![0_u64; problem.nodes];
    for &job in problem.jobs {
        if let [node] = problem.eligible[job][..] {
            forced[node] = forced[node].saturating_add(problem.times[job]);
        }
    }
    for &job in problem.jobs {
        if problem.eligible[job].len() > 1 {
            let least = problem.eligible[job].iter().map(|&node| forced[node]).min().unwrap_or(0);
            consider(least.saturating_add(problem.times[job]), BoundBasis::Forced { job });
        }
    }
    for class in &classes {
        let mut times: Vec<u64> = problem
            .jobs
            .iter()
            .filter(|&&job| problem.eligible[job].iter().all(|node| class.contains(node)))
            .map(|&job| problem.times[job])
            .collect();
        if times.is_empty() || class.is_empty() {
            continue;
        }
        times.sort_unstable_by(|a, b| b.cmp(a));
        let nodes = class.len();
        let total = times.iter().fold(0_u64, |sum, time| sum.saturating_add(*time));
        consider(total.div_ceil(nodes as u64), BoundBasis::Average { nodes, jobs: times.len() });
        let mut share = 2;
        while (share - 1) * nodes < times.len() {
            // Of the (share-1)·nodes + 1 longest, some node runs `share`: at least the
            // `share` shortest of them.
            let top = (share - 1) * nodes + 1;
            let load =
                times[top - share..top].iter().fold(0_u64, |sum, time| sum.saturating_add(*time));
            consider(load, BoundBasis::Pigeonhole { nodes, top, share });
            share += 1;
        }
    }
    best
}

/// Places the jobs by `method`; `bound` is the lower bound, where a search may stop.
pub(super) fn assign(problem: &Problem<'_>, method: Method, bound: u64) -> Found {
    let mut state = State::greedy(problem, &lpt_order(problem));
    if method != Method::Lpt {
        state.local_search(problem);
        // Jobs that few nodes can run are easy to strand behind flexible long ones: also try
        // placing them first, and keep the better.
        let mut confined = State::greedy(problem, &confined_first_order(problem));
        confined.local_search(problem);
        if confined.makespan() < state.makespan() {
            state = confined;
        }
    }
    let mut optimal = state.makespan() <= bound;
    if method == Method::Exact && !optimal {
        optimal = state.exact(problem, bound);
    }
    let assignment = problem.jobs.iter().map(|&job| state.node_of[job]).collect();
    Found { assignment, optimal }
}

/// A complete assignment and its loads.
struct State {
    /// The node of each job, by job index (unused for unplaced jobs).
    node_of: Vec<usize>,
    loads: Vec<u64>,
}

impl State {
    /// The jobs in `order`, each to the least loaded node it may run on (the first of equals).
    fn greedy(problem: &Problem<'_>, order: &[usize]) -> State {
        let mut state =
            State { node_of: vec![usize::MAX; problem.times.len()], loads: vec![0; problem.nodes] };
        for &job in order {
            let node = problem.eligible[job]
                .iter()
                .copied()
                .min_by_key(|&node| (state.loads[node], node))
                .unwrap_or_default();
            state.node_of[job] = node;
            state.loads[node] = state.loads[node].saturating_add(problem.times[job]);
        }
        state
    }

    fn makespan(&self) -> u64 {
        self.loads.iter().copied().max().unwrap_or(0)
    }

    /// While a move of one job off a busiest node, or a swap of one of its jobs with a shorter
    /// job of another node, leaves both nodes below that busiest load, makes the best such
    /// change (the lowest new peak of the two). Each change lowers the sorted vector of loads,
    /// so it ends.
    fn local_search(&mut self, problem: &Problem<'_>) {
        let times = problem.times;
        loop {
            let peak = self.makespan();
            // (new peak of the two nodes, job moved off, its new node, job moved back)
            let mut best: Option<(u64, usize, usize, Option<usize>)> = None;
            let mut offer = |candidate: (u64, usize, usize, Option<usize>)| {
                if candidate.0 < peak && best.is_none_or(|best| candidate.0 < best.0) {
                    best = Some(candidate);
                }
            };
            for busy in (0..problem.nodes).filter(|&node| self.loads[node] == peak) {
                for &moved in problem.jobs.iter().filter(|&&job| self.node_of[job] == busy) {
                    for &other in problem.eligible[moved].iter().filter(|&&node| node != busy) {
                        let left = self.loads[busy] - times[moved];
                        offer((left.max(self.loads[other] + times[moved]), moved, other, None));
                        for &back in problem.jobs.iter().filter(|&&job| {
                            self.node_of[job] == other
                                && times[job] < times[moved]
                                && problem.eligible[job].contains(&busy)
                        }) {
                            let busy_load = left + times[back];
                            let other_load = self.loads[other] - times[back] + times[moved];
                            offer((busy_load.max(other_load), moved, other, Some(back)));
                        }
                    }
                }
            }
            let Some((_, moved, other, back)) = best else { return };
            let busy = self.node_of[moved];
            self.loads[busy] -= times[moved];
            self.loads[other] += times[moved];
            self.node_of[moved] = other;
            if let Some(back) = back {
                self.loads[other] -= times[back];
                self.loads[busy] += times[back];
                self.node_of[back] = busy;
            }
        }
    }

    /// Branch and bound over the assignments of the jobs longer than zero, longest first,
    /// from this state as the best so far; keeps a better assignment when it finds one.
    /// Returns whether the search finished (the result is then optimal) within
    /// [`EXACT_SEARCH_BUDGET`] nodes, or reached `bound`.
    fn exact(&mut self, problem: &Problem<'_>, bound: u64) -> bool {
        let order: Vec<usize> =
            lpt_order(problem).into_iter().filter(|&job| problem.times[job] > 0).collect();
        // Nodes no job tells apart are interchangeable: of those with equal loads, try one.
        let twin: Vec<Vec<bool>> = (0..problem.nodes)
            .map(|a| {
                (0..problem.nodes)
                    .map(|b| {
                        problem.jobs.iter().all(|&job| {
                            problem.eligible[job].contains(&a) == problem.eligible[job].contains(&b)
                        })
                    })
                    .collect()
            })
            .collect();
        let mut remaining = vec![0_u64; order.len() + 1];
        for index in (0..order.len()).rev() {
            remaining[index] = remaining[index + 1] + problem.times[order[index]];
        }
        // The zero-length jobs stay where they are: they change no load.
        let mut loads = vec![0_u64; problem.nodes];
        let mut search = Search {
            problem,
            order: &order,
            twin: &twin,
            remaining: &remaining,
            bound,
            best: self.makespan(),
            best_nodes: None,
            current: vec![0; order.len()],
            scratch: vec![Vec::new(); order.len()],
            visits: 0,
            stopped: false,
        };
        search.descend(0, &mut loads, 0, 0);
        if let Some(nodes) = search.best_nodes.take() {
            for (&job, node) in order.iter().zip(nodes) {
                self.node_of[job] = node;
            }
            self.loads = vec![0; problem.nodes];
            for &job in problem.jobs {
                self.loads[self.node_of[job]] += problem.times[job];
            }
        }
        !search.stopped || search.best <= bound
    }
}

struct Search<'a> {
    problem: &'a Problem<'a>,
    order: &'a [usize],
    twin: &'a [Vec<bool>],
    /// The total time of the jobs from each position of `order` on.
    remaining: &'a [u64],
    bound: u64,
    best: u64,
    best_nodes: Option<Vec<usize>>,
    current: Vec<usize>,
    /// A buffer of candidate nodes per depth.
    scratch: Vec<Vec<usize>>,
    visits: u64,
    /// The budget ran out, or the bound was reached.
    stopped: bool,
}

impl Search<'_> {
    fn descend(&mut self, position: usize, loads: &mut [u64], placed: u64, peak: u64) {
        if self.stopped {
            return;
        }
        self.visits += 1;
        if self.visits > EXACT_SEARCH_BUDGET {
            self.stopped = true;
            return;
        }
        if position == self.order.len() {
            self.best = peak;
            self.best_nodes = Some(self.current.clone());
            if peak <= self.bound {
                self.stopped = true;
            }
            return;
        }
        // Even spread over all nodes of what is left cannot beat the best: stop here.
        let spread = (placed + self.remaining[position]).div_ceil(loads.len() as u64);
        if spread.max(peak) >= self.best {
            return;
        }
        let job = self.order[position];
        let time = self.problem.times[job];
        // This depth's candidates, least loaded first, in a buffer kept between visits.
        let mut candidates = std::mem::take(&mut self.scratch[position]);
        candidates.clear();
        candidates.extend_from_slice(&self.problem.eligible[job]);
        candidates.sort_unstable_by_key(|&node| (loads[node], node));
        for (index, &node) in candidates.iter().enumerate() {
            let twin_tried = candidates[..index]
                .iter()
                .any(|&done| loads[done] == loads[node] && self.twin[done][node]);
            if twin_tried {
                continue;
            }
            let load = loads[node] + time;
            if load >= self.best {
                continue;
            }
            loads[node] = load;
            self.current[position] = node;
            self.descend(position + 1, loads, placed + time, peak.max(load));
            loads[node] -= time;
            if self.stopped {
                break;
            }
        }
        self.scratch[position] = candidates;
    }
}

/// The jobs longest first; of equals, the one with fewer nodes to go to first, then by index.
fn lpt_order(problem: &Problem<'_>) -> Vec<usize> {
    let mut order: Vec<usize> = problem.jobs.to_vec();
    order.sort_by(|&a, &b| {
        problem.times[b]
            .cmp(&problem.times[a])
            .then(problem.eligible[a].len().cmp(&problem.eligible[b].len()))
            .then(a.cmp(&b))
    });
    order
}

/// The jobs with the fewest nodes to go to first, longest first among those.
fn confined_first_order(problem: &Problem<'_>) -> Vec<usize> {
    let mut order: Vec<usize> = problem.jobs.to_vec();
    order.sort_by(|&a, &b| {
        problem.eligible[a]
            .len()
            .cmp(&problem.eligible[b].len())
            .then(problem.times[b].cmp(&problem.times[a]))
            .then(a.cmp(&b))
    });
    order
}
