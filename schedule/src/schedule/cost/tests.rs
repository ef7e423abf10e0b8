//! The counts of `cost`, each test a variation on the benchmark's real node.

use super::*;

/// bench/gpu-cost.md's node: tp 8 on an 8-GPU node (one server at a time), the PR's work
/// first, 2 cells of 5 pairs, no gateway probe, a reload at every switch, no accuracy.
const REAL_NODE: Work = Work {
    layout: Layout::OneAtATime,
    pr_work_first: true,
    cells: 2,
    pairs: 5,
    probed: false,
    switching: Switching::Blocked { runs: 1 },
    accuracy_rounds: 0,
};

/// One at a time, probed, in blocks of 2 runs, 3 block pairs a cell: the demo's PR #130
/// without its accuracy rounds.
const BLOCKED: Work =
    Work { pairs: 3, probed: true, switching: Switching::Blocked { runs: 2 }, ..REAL_NODE };

#[test]
fn a_run_holds_both_servers_gpus_where_they_fit_and_a_topology_every_instances() {
    let plain = Recipe::parse(crate::recipe::EXAMPLE, "t.toml").expect("the example (tp 8)");
    let holds = |gpus| Holds::of(gpus, &plain);
    assert_eq!(holds(Some(16)), Holds { nodes: 1, gpus: 16 });
    assert_eq!(holds(Some(8)), Holds { nodes: 1, gpus: 8 });
    assert_eq!(holds(Some(4)), Holds { nodes: 1, gpus: 4 }, "never more than the node has");
    assert_eq!(holds(None), Holds { nodes: 1, gpus: 8 });
    let topology = crate::recipe::EXAMPLE.replace(
        "[timeouts]",
        "[topology.prefill]\ninstances = 2\ntp = 8\ncommand = \"s --port {port} --b {bootstrap_port}\"\n[topology.decode]\ninstances = 1\ntp = 16\nnodes = 2\ncommand = \"s --port {port} --rank {node_rank} --nnodes {nnodes} --dist {dist_init_addr}\"\n[topology.router]\ncommand = \"r --port {port}\"\n\n[timeouts]",
    );
    let topology = Recipe::parse(&topology, "t.toml").expect("a 2P1D topology");
    assert_eq!(Holds::of(Some(16), &topology), Holds { nodes: 4, gpus: 32 });
}

#[test]
fn a_node_with_room_loads_twice_and_one_at_a_time_reloads_per_switch() {
    let work = Work { layout: Layout::Together, ..REAL_NODE };
    assert_eq!(counts(&work), Counts { setup_loads: 2, runs: 22, ..Counts::default() });
    let one = Work { layout: Layout::OneAtATime, probed: true, ..work };
    let counted = counts(&one);
    assert_eq!((counted.loads(), counted.runs, counted.probes), (12, 22, 12));
    let no_pr_work = Work { pr_work_first: false, ..one };
    assert_eq!(counts(&no_pr_work).loads(), 11);
    let no_speed = Work { cells: 0, ..one };
    assert_eq!((counts(&no_speed).loads(), counts(&no_speed).runs), (2, 0));
    let waking = Work { switching: Switching::Wake, ..one };
    assert_eq!(
        (counts(&waking).loads(), counts(&waking).wakes, counts(&waking).probes),
        (2, 10, 2)
    );
    let waking_late = Work { pr_work_first: false, ..waking };
    assert_eq!((counts(&waking_late).loads(), counts(&waking_late).wakes), (2, 9));
}

#[test]
fn accuracy_rounds_after_the_first_switch_once_each_and_base_opens_the_pairs() {
    let work = Work { accuracy_rounds: 6, ..BLOCKED };
    // Six rounds: PR then base, then five alternating rounds (a switch each) that end on
    // the PR's server, one more switch to base's for the pairs, then 2 a block pair: the
    // demo's PR #130 (mimo_v3_pd, 6 repeats, 3 block pairs) loaded 14 times.
    assert_eq!(counts(&work).setup_loads, 2 + 5 + 1);
    assert_eq!((counts(&work).loads(), counts(&work).probes), (14, 14));
    // Ending on base's server (an odd number of rounds): no switch back.
    assert_eq!(counts(&Work { accuracy_rounds: 5, ..work }).setup_loads, 2 + 4);
    // One round, or none: no switch of its own.
    for rounds in [0, 1] {
        assert_eq!(counts(&Work { accuracy_rounds: rounds, ..work }).setup_loads, 2);
    }
    // Without speed cells nothing follows the rounds.
    assert_eq!(counts(&Work { accuracy_rounds: 6, cells: 0, ..work }).loads(), 2 + 5);
    // By memory release the switches are wakes; both up at once, there are none.
    let waking = counts(&Work { switching: Switching::Wake, ..work });
    assert_eq!((waking.loads(), waking.setup_wakes, waking.wakes), (2, 6, 6));
    let together = counts(&Work { layout: Layout::Together, ..work });
    assert_eq!((together.loads(), together.setup_wakes), (2, 0));
}

#[test]
fn blocked_the_runs_of_a_block_share_its_load_and_a_block_pair_costs_two() {
    let work = BLOCKED;
    // 2 setup loads and 2 a block pair; 2 cells of 2 × 3 + 1 blocks of 2 runs.
    let expected =
        Counts { setup_loads: 2, speed_loads: 6, runs: 28, probes: 8, ..Counts::default() };
    assert_eq!(counts(&work), expected);
    // Both up at once, there are no blocks.
    let together = Work { layout: Layout::Together, ..work };
    assert_eq!((counts(&together).loads(), counts(&together).runs), (2, 14));
    // What the estimate counts from a recipe's key: `probe` the costlier design.
    assert_eq!(Switching::declared(MemoryApiKey::Sglang), Switching::Wake);
    assert_eq!(Switching::declared(MemoryApiKey::Vllm), Switching::Wake);
    let blocks = Switching::Blocked { runs: 2 };
    assert_eq!(Switching::declared(MemoryApiKey::None), blocks);
    assert_eq!(Switching::declared(MemoryApiKey::Probe), blocks);
    // A topology reloads at every switch, whatever API its recipe names.
    let plain = crate::recipe::EXAMPLE.replace("memory-api = \"probe\"", "memory-api = \"sglang\"");
    let topology = plain.replace(
        "[timeouts]",
        "[topology.prefill]\ninstances = 1\ntp = 8\ncommand = \"s --port {port} --b {bootstrap_port}\"\n[topology.decode]\ninstances = 1\ntp = 8\ncommand = \"s --port {port}\"\n[topology.router]\ncommand = \"r --port {port}\"\n\n[timeouts]",
    );
    let parse = |text: &str| Recipe::parse(text, "t.toml").expect("parses");
    assert_eq!(Switching::of(&parse(&plain)), Switching::Wake);
    assert_eq!(Switching::of(&parse(&topology)), blocks);
}

/// bench/gpu-cost.md's "after": one model, full tier, tp 8 on an 8-GPU node (one at a
/// time), 2 cells of 5 pairs, a load 10 min and a run 2 min: 12 loads and 22 runs, 164
/// min, 1312 GPU-minutes.
#[test]
fn the_benchmarks_real_node() {
    let work = REAL_NODE;
    let minute = Duration::from_secs(60);
    let units =
        Units { load: 10 * minute, wake: minute / 2, run: 2 * minute, probe: Duration::ZERO };
    let counted = counts(&work);
    assert_eq!((counted.loads(), counted.wakes, counted.runs), (12, 0, 22));
    assert_eq!(counted.time(&units), 164 * minute);
    assert_eq!(counted.time(&units).as_secs() * 8 / 60, 1312);
    // Switching by memory release: 2 loads, 10 wakes, 69 min, 552 GPU-minutes.
    let waking = counts(&Work { switching: Switching::Wake, ..work });
    assert_eq!((waking.loads(), waking.wakes, waking.runs), (2, 10, 22));
    assert_eq!(waking.time(&units).as_secs() * 8 / 60, 552);
    // Blocked (no memory API), 2 runs a block, 5 block pairs (what the estimate counts): 12
    // loads, 44 runs, 208 min, 1664 GPU-minutes; at 4 block pairs (two-run blocks take 3.7
    // to 4.75 on average without a load effect, `prgate_gate::speed::blocks`): 10 loads, 36
    // runs, 172 min, 1376 GPU-minutes.
    let blocked = Work { switching: Switching::Blocked { runs: 2 }, ..work };
    let five = counts(&blocked);
    assert_eq!((five.loads(), five.wakes, five.runs), (12, 0, 44));
    assert_eq!(five.time(&units).as_secs() * 8 / 60, 1664);
    let four = counts(&Work { pairs: 4, ..blocked });
    assert_eq!((four.loads(), four.runs), (10, 36));
    assert_eq!(four.time(&units).as_secs() * 8 / 60, 1376);
}

#[test]
fn gpu_seconds_are_whole_seconds_times_the_gpus_held() {
    let secs = std::time::Duration::from_secs_f64;
    for (gpus, duration, expected) in [
        (8, secs(10.0), 80),
        (8, secs(10.2), 88),
        (0, secs(10.0), 0),
        (4, secs(0.0), 0),
        (u32::MAX, std::time::Duration::MAX, u64::MAX),
    ] {
        assert_eq!(
            Holds { nodes: 1, gpus }.gpu_seconds(duration),
            expected,
            "{gpus} × {duration:?}"
        );
    }
}
