//! Tests of the preflight: the tools' outputs read into memory figures, and whole preflights
//! over a fake machine (a root folder with device nodes and sysfs, and canned tool answers).
//! `runner/tests/preflight.rs` runs the same through real processes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::memory::{
    Listed, OutputError, parse_amd_smi, parse_rocm_smi, read_sysfs, read_sysfs_busy,
};
use super::*;

const AMD_SMI_LIST: &str = include_str!("fixtures/amd-smi-metric-mem-usage.json");
const AMD_SMI_GPU_DATA: &str = include_str!("fixtures/amd-smi-metric-mem-usage-gpu-data.out");
const AMD_SMI_PLAIN: &str = include_str!("fixtures/amd-smi-metric-mem-usage-plain.json");
const ROCM_SMI_VRAM: &str = include_str!("fixtures/rocm-smi-showmeminfo-vram.json");
/// `amd-smi metric --mem-usage --usage --json` of two MI300X, GPU 1 busy: the shape amd-smi's
/// `metric` builds (`amdsmi_cli/amdsmi_commands.py`, ROCm/amdsmi), not captured from a GPU.
const AMD_SMI_USAGE: &str = include_str!("fixtures/amd-smi-metric-mem-usage-usage.json");
/// `rocm-smi --showmeminfo vram --showuse --json` on one line, as `rocm_smi.py` prints it
/// (ROCm/rocm_smi_lib's `showGpuUse`, `showMemInfo`, `formatJson`); card 2 without `GPU use`
/// (what an unsupported figure leaves), not captured from a GPU.
const ROCM_SMI_USE: &str = include_str!("fixtures/rocm-smi-showmeminfo-vram-showuse.json");

const MIB: u64 = 1024 * 1024;

/// The GPUs a parser reads, one line each, or its error.
fn parsed(parse: fn(&str) -> Result<Listed, OutputError>, output: &str) -> String {
    match parse(output) {
        Err(problem) => format!("error: {problem}"),
        Ok(listed) if listed.is_empty() => "no GPU".to_owned(),
        Ok(listed) => listed
            .iter()
            .map(|(id, figures)| match figures.vram {
                Some(vram) => format!("{id}: {}/{} MiB", vram.used / MIB, vram.total / MIB),
                None => format!("{id}: no figures"),
            })
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[test]
fn amd_smi_output_is_read_in_every_shape() {
    let eight_idle = (0..8).map(|id| format!("{id}: 283/196592 MiB")).collect::<Vec<_>>();
    let mut one_busy = eight_idle.clone();
    one_busy[3] = "3: 176911/196592 MiB".to_owned();
    let cases = [
        // A list of GPUs with {"value", "unit"} figures (ROCm 6.2 to 7.x).
        (AMD_SMI_LIST, eight_idle.join(", ")),
        // The list under "gpu_data" (newer releases), after Python's warnings.
        (AMD_SMI_GPU_DATA, one_busy.join(", ")),
        // Bare numbers of MiB (older releases), "N/A" beside them.
        (AMD_SMI_PLAIN, "0: 10/65520 MiB, 1: 10/65520 MiB".to_owned()),
        (
            r#"[{"gpu": 0, "mem_usage": {"total_vram": "N/A", "used_vram": "N/A", "free_vram": "N/A"}}]"#,
            "0: no figures".to_owned(),
        ),
        (
            r#"[{"gpu": 0, "usage": {"gfx_activity": {"value": 0, "unit": "%"}}}]"#,
            "0: no figures".to_owned(),
        ),
        (
            r#"[{"gpu": 0, "mem_usage": {"total_vram": {"value": 16, "unit": "GB"}, "used_vram": "N/A", "free_vram": {"value": 12, "unit": "GB"}}}]"#,
            "0: 4096/16384 MiB".to_owned(),
        ),
        (
            r#"[{"gpu": 0, "mem_usage": {"total_vram": {"value": 16, "unit": "furlongs"}, "used_vram": {"value": 1, "unit": "MB"}}}]"#,
            "0: no figures".to_owned(),
        ),
        (
            r#"[{"cpu": 0, "power": "N/A"}, {"gpu": 5, "mem_usage": {"total_vram": 8, "used_vram": 1}}]"#,
            "5: 1/8 MiB".to_owned(),
        ),
        (r#"{"cpu_data": [], "core_data": [], "gpu_data": []}"#, "no GPU".to_owned()),
        ("[]\n{\"trailing\": true}", "no GPU".to_owned()),
        (r#"{"gpus": []}"#, r#"error: its JSON is an object without a "gpu_data" list"#.to_owned()),
        ("42", "error: it printed no JSON: \"42\"".to_owned()),
        (
            r#"[{"name": "MI300X"}]"#,
            r#"error: an entry has no "gpu" number: {"name":"MI300X"}"#.to_owned(),
        ),
        (r#"[{"gpu": 4294967296}]"#, "error: GPU number 4294967296 is too large".to_owned()),
        (
            "AMDSMI_STATUS_DRIVER_NOT_LOADED\n",
            "error: it printed no JSON: \"AMDSMI_STATUS_DRIVER_NOT_LOADED\\n\"".to_owned(),
        ),
        (
            "[{\"gpu\": 0,\n",
            "error: its JSON does not parse: EOF while parsing a value at line 2 column 0"
                .to_owned(),
        ),
    ];
    for (output, expect) in cases {
        assert_eq!(parsed(parse_amd_smi, output), expect, "{output}");
    }
}

#[test]
fn rocm_smi_output_is_read() {
    let eight = (0..8u64)
        .map(|id| format!("{id}: {}/196592 MiB", (283 * MIB + 12288 * id) / MIB))
        .collect::<Vec<_>>()
        .join(", ");
    let cases = [
        (ROCM_SMI_VRAM, eight),
        (
            r#"{"card1": {"VRAM Total Memory (B)": "N/A", "VRAM Total Used Memory (B)": "N/A"},
                "card0": {"VRAM Total Memory (B)": 2097152, "VRAM Total Used Memory (B)": "1048576"},
                "system": {"Driver version": "6.8.5"}, "cardX": {}}"#,
            "0: 1/2 MiB, 1: no figures".to_owned(),
        ),
        ("WARNING: Unlocked monitor_devices lock\n{}", "no GPU".to_owned()),
        ("[1]", "error: its JSON is not an object keyed by card".to_owned()),
    ];
    for (output, expect) in cases {
        assert_eq!(parsed(parse_rocm_smi, output), expect, "{output}");
    }
}

/// How busy each GPU a parser reads is, one line each, or its error.
fn parsed_busy(parse: fn(&str) -> Result<Listed, OutputError>, output: &str) -> String {
    match parse(output) {
        Err(problem) => format!("error: {problem}"),
        Ok(listed) => listed
            .iter()
            .map(|(id, figures)| match figures.busy_percent {
                Some(percent) => format!("{id}: {percent}% busy"),
                None => format!("{id}: no activity"),
            })
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[test]
fn how_busy_a_gpu_is_is_read_from_the_same_output_as_its_memory() {
    // amd-smi, asked for both: the memory as before, and usage.gfx_activity.
    assert_eq!(parsed(parse_amd_smi, AMD_SMI_USAGE), "0: 283/196592 MiB, 1: 283/196592 MiB");
    assert_eq!(parsed_busy(parse_amd_smi, AMD_SMI_USAGE), "0: 0% busy, 1: 100% busy");
    let amd_smi = [
        // Asked for the memory alone (the preflight): no activity.
        (
            AMD_SMI_LIST,
            (0..8).map(|id| format!("{id}: no activity")).collect::<Vec<_>>().join(", "),
        ),
        // Releases before 24.5 (amd-smi's "GPU Usage/activity update"): gfx_usage, a number.
        (r#"[{"gpu": 0, "usage": {"gfx_usage": 37, "mem_usage": 2}}]"#, "0: 37% busy".to_owned()),
        (
            r#"{"gpu_data": [{"gpu": 2, "usage": {"gfx_activity": {"value": 3, "unit": "%"}}}]}"#,
            "2: 3% busy".to_owned(),
        ),
        // No figure: "N/A", the library's 0xFFFF past 100, a usage amd-smi could not read, a
        // unit that is not a percentage.
        (r#"[{"gpu": 0, "usage": {"gfx_activity": "N/A"}}]"#, "0: no activity".to_owned()),
        (r#"[{"gpu": 0, "usage": {"gfx_activity": 65535}}]"#, "0: no activity".to_owned()),
        (r#"[{"gpu": 0, "usage": "N/A", "mem_usage": {}}]"#, "0: no activity".to_owned()),
        (
            r#"[{"gpu": 0, "usage": {"gfx_activity": {"value": 5, "unit": "MHz"}}}]"#,
            "0: no activity".to_owned(),
        ),
        // A fraction reads as the next whole percent: never less busy than it is.
        (
            r#"[{"gpu": 0, "usage": {"gfx_activity": {"value": 2.1, "unit": "%"}}}]"#,
            "0: 3% busy".to_owned(),
        ),
    ];
    for (output, expect) in amd_smi {
        assert_eq!(parsed_busy(parse_amd_smi, output), expect, "{output}");
    }
    // rocm-smi, asked for both: "GPU use (%)" (not the coarse-grain "GFX Activity" counter).
    let three = "0: 283/196592 MiB, 1: 283/196592 MiB, 2: 283/196592 MiB";
    assert_eq!(parsed(parse_rocm_smi, ROCM_SMI_USE), three);
    assert_eq!(
        parsed_busy(parse_rocm_smi, ROCM_SMI_USE),
        "0: 0% busy, 1: 100% busy, 2: no activity"
    );
    let rocm_smi = [
        (
            ROCM_SMI_VRAM,
            (0..8).map(|id| format!("{id}: no activity")).collect::<Vec<_>>().join(", "),
        ),
        (
            r#"{"card0": {"GPU use (%)": "95.0"}, "card1": {"GPU use (%)": "N/A"}}"#,
            "0: 95% busy, 1: no activity".to_owned(),
        ),
        (
            r#"{"card0": {"GPU use (%)": "-1"}, "card1": {"GPU use (%)": 4}}"#,
            "0: no activity, 1: 4% busy".to_owned(),
        ),
    ];
    for (output, expect) in rocm_smi {
        assert_eq!(parsed_busy(parse_rocm_smi, output), expect, "{output}");
    }
}

#[test]
fn how_busy_a_gpu_is_is_read_from_sysfs_in_the_render_nodes_device_folder() {
    let root = tempfile::tempdir().expect("a temp dir");
    let device = root.path().join("sys/class/drm/renderD128/device");
    std::fs::create_dir_all(&device).expect("the device folder");
    let render = Path::new("/dev/dri/renderD128");
    for (text, expect) in [("0\n", "0"), ("100\n", "100"), ("7", "7")] {
        std::fs::write(device.join("gpu_busy_percent"), text).expect("busy");
        let percent = read_sysfs_busy(root.path(), render).expect("a figure");
        assert_eq!(percent.to_string(), expect, "{text:?}");
    }
    std::fs::write(device.join("gpu_busy_percent"), "busy\n").expect("busy");
    let problem = read_sysfs_busy(root.path(), render).expect_err("garbage").to_string();
    assert!(problem.ends_with("gpu_busy_percent holds \"busy\", not a percentage"), "{problem}");
    let problem = read_sysfs_busy(root.path(), Path::new("/dev/dri/renderD136"))
        .expect_err("missing")
        .to_string();
    assert!(problem.contains("renderD136/device/gpu_busy_percent: No such file"), "{problem}");
}

#[test]
fn sysfs_is_read_in_the_render_nodes_device_folder() {
    let root = tempfile::tempdir().expect("a temp dir");
    let device = root.path().join("sys/class/drm/renderD128/device");
    std::fs::create_dir_all(&device).expect("the device folder");
    std::fs::write(device.join("mem_info_vram_total"), "206141652992\n").expect("total");
    std::fs::write(device.join("mem_info_vram_used"), "296747008\n").expect("used");
    let vram = read_sysfs(root.path(), Path::new("/dev/dri/renderD128")).expect("figures");
    assert_eq!((vram.total, vram.used), (206_141_652_992, 296_747_008));

    std::fs::write(device.join("mem_info_vram_used"), "lots\n").expect("used");
    let problem =
        read_sysfs(root.path(), Path::new("/dev/dri/renderD128")).expect_err("garbage").to_string();
    assert!(
        problem.ends_with("mem_info_vram_used holds \"lots\", not a number of bytes"),
        "{problem}"
    );
    let problem =
        read_sysfs(root.path(), Path::new("/dev/dri/renderD136")).expect_err("missing").to_string();
    assert!(problem.contains("renderD136/device/mem_info_vram_total: No such file"), "{problem}");
}

/// A canned answer: the output, a failure, or a hang.
#[derive(Debug, Clone)]
enum Answer {
    Prints(&'static str),
    Fails(&'static str),
    Hangs,
}

/// Canned answers of the probe commands, by command line; a command without one cannot
/// start.
#[derive(Debug, Default)]
struct FakeCommands {
    answers: BTreeMap<String, Answer>,
}

impl CommandRunner for FakeCommands {
    fn run(&self, _log: &str, argv: &[&str]) -> Result<String, CommandError> {
        let program = argv[0].to_owned();
        let (problem, timed_out_after) = match self.answers.get(&argv.join(" ")) {
            Some(Answer::Prints(output)) => return Ok((*output).to_owned()),
            Some(Answer::Fails(problem)) => ((*problem).to_owned(), None),
            Some(Answer::Hangs) => (
                "gave no answer within 30s and was stopped".to_owned(),
                Some(Duration::from_secs(30)),
            ),
            None => ("cannot start: No such file or directory (os error 2)".to_owned(), None),
        };
        Err(CommandError { program, problem, timed_out_after })
    }
}

/// `program` with `args`, as [`FakeCommands`] keys it.
fn command(program: &str, args: &[&str]) -> String {
    std::iter::once(program).chain(args.iter().copied()).collect::<Vec<_>>().join(" ")
}

#[derive(Debug)]
struct FakeImage(Result<(), String>);

impl ImageCheck for FakeImage {
    fn check_image(&self, _image: &Image) -> Result<(), super::ImageProblem> {
        self.0.clone().map_err(Into::into)
    }
}

/// A machine to preflight: GPUs 2 and 3 of the node profile, with what the test changes.
#[derive(Clone)]
struct Machine {
    amd_smi: Option<Result<&'static str, &'static str>>,
    rocm_smi: Option<Result<&'static str, &'static str>>,
    /// sysfs figures (used MiB, total MiB) per render node; none for no sysfs.
    sysfs: Vec<(&'static str, u64, u64)>,
    render_nodes: Vec<&'static str>,
    kfd: bool,
    /// Checkpoint folders to create under the store, with a file in them or not.
    store: Vec<(&'static str, bool)>,
    needed: Vec<&'static str>,
    thresholds: Thresholds,
    image: Option<Result<(), &'static str>>,
    /// More answers: (program, args, answer).
    more: Vec<(&'static str, &'static [&'static str], Answer)>,
    /// The pids that run (`/proc/<pid>` exists).
    alive: Vec<u32>,
    /// sysfs RAS counters: (render node, block file, text).
    ras: Vec<(&'static str, &'static str, &'static str)>,
    /// More of the profile's `[health]` table.
    health: &'static str,
}

impl Default for Machine {
    fn default() -> Machine {
        Machine {
            amd_smi: Some(Ok(AMD_SMI_LIST)),
            rocm_smi: Some(Ok(ROCM_SMI_VRAM)),
            sysfs: vec![("renderD144", 283, 196_592), ("renderD152", 283, 196_592)],
            render_nodes: vec!["renderD144", "renderD152"],
            kfd: true,
            store: vec![("meta/Llama-4", true), ("qwen/Qwen3", true)],
            needed: vec!["llama", "qwen"],
            thresholds: Thresholds {
                min_free_work_bytes: 0,
                min_free_cache_bytes: 0,
                ..Thresholds::default()
            },
            image: Some(Ok(())),
            more: Vec::new(),
            alive: Vec::new(),
            ras: Vec::new(),
            health: "",
        }
    }
}

/// Builds `machine` in a temp dir, runs the preflight and renders its answer as users see it.
fn check(machine: Machine) -> String {
    let dir = tempfile::tempdir().expect("a temp dir");
    let tmp = dir.path();
    let root = tmp.join("root");
    for node in &machine.render_nodes {
        std::fs::create_dir_all(root.join("dev/dri")).expect("dev/dri");
        std::fs::write(root.join("dev/dri").join(node), "").expect("a render node");
    }
    if machine.kfd {
        std::fs::create_dir_all(root.join("dev")).expect("dev");
        std::fs::write(root.join("dev/kfd"), "").expect("kfd");
    }
    for (node, used, total) in &machine.sysfs {
        let device = root.join("sys/class/drm").join(node).join("device");
        std::fs::create_dir_all(&device).expect("the device folder");
        std::fs::write(device.join("mem_info_vram_total"), format!("{}\n", total * MIB))
            .expect("total");
        std::fs::write(device.join("mem_info_vram_used"), format!("{}\n", used * MIB))
            .expect("used");
    }
    for pid in &machine.alive {
        std::fs::create_dir_all(root.join("proc").join(pid.to_string())).expect("a process");
    }
    for (node, block, text) in &machine.ras {
        let folder = root.join("sys/class/drm").join(node).join("device/ras");
        std::fs::create_dir_all(&folder).expect("the ras folder");
        std::fs::write(folder.join(block), text).expect("a counter");
    }
    for (path, filled) in &machine.store {
        let folder = tmp.join("models").join(path);
        std::fs::create_dir_all(&folder).expect("a checkpoint folder");
        if *filled {
            std::fs::write(folder.join("config.json"), "{}").expect("config.json");
        }
    }
    let profile = format!(
        r#"name = "mi300x-1"
hardware = "mi300x"
checkpoint-store = "{tmp}/models"
cache-dir = "{tmp}/cache"
work-dir = "{tmp}/work"
[gpus]
ids = [2, 3]
render-devices = ["/dev/dri/renderD144", "/dev/dri/renderD152"]
[image]
name = "lmsysorg/sglang:v0.5.5-rocm700-mi30x"
[checkpoints]
llama = "meta/Llama-4"
qwen = "qwen/Qwen3"
deepseek = "deepseek-ai/DeepSeek-V4"
[health]
{health}
"#,
        tmp = tmp.display(),
        health = machine.health,
    );
    let node = NodeProfile::parse(&profile, "node.toml").expect("the profile");
    let mut commands = FakeCommands::default();
    let memory = [
        ("amd-smi", AMD_SMI_MEMORY, machine.amd_smi),
        ("rocm-smi", ROCM_SMI_MEMORY, machine.rocm_smi),
    ];
    for (program, args, answer) in memory {
        let answer = match answer {
            Some(Ok(output)) => Answer::Prints(output),
            Some(Err(problem)) => Answer::Fails(problem),
            None => continue,
        };
        commands.answers.insert(command(program, args), answer);
    }
    for (program, args, answer) in &machine.more {
        commands.answers.insert(command(program, args), answer.clone());
    }
    let image = machine.image.map(|answer| FakeImage(answer.map_err(str::to_owned)));
    let needed: Vec<String> = machine.needed.iter().map(|name| (*name).to_owned()).collect();
    let preflight = Preflight {
        node: &node,
        checkpoints: &needed,
        thresholds: machine.thresholds,
        probes: Probes { commands: &commands, root: &root },
        image_check: image.as_ref().map(|image| image as &dyn ImageCheck),
    };
    let rendered = match preflight.run() {
        Ok(()) => "ok".to_owned(),
        Err(failure) => {
            let (reason, detail) = failure.to_not_run();
            let mut lines = vec![format!(
                "not-run {reason:?}; blocks the run: {}",
                if failure.blocks_run() { "yes" } else { "no" }
            )];
            for finding in failure.findings() {
                let (reason, finding_detail) = finding.to_not_run();
                assert_eq!(finding_detail, format!("preflight: {finding}"));
                assert!(detail.contains(&finding.to_string()), "{detail}");
                lines.push(format!(
                    "- {} ({reason:?}) {}: {}",
                    finding.check.describe(),
                    finding.subject,
                    finding.problem
                ));
            }
            lines.join("\n")
        }
    };
    let rendered = rendered.replace(&tmp.display().to_string(), "[tmp]");
    regex::Regex::new(r"\d+\.\d GiB free;")
        .expect("a regex")
        .replace_all(&rendered, "[n] GiB free;")
        .into_owned()
}

#[test]
fn preflights_over_fake_machines() {
    let cases = [
        ("amd-smi lists both GPUs, free", Machine::default()),
        (
            "amd-smi's gpu_data: GPU 3 is busy",
            Machine { amd_smi: Some(Ok(AMD_SMI_GPU_DATA)), ..Machine::default() },
        ),
        (
            "amd-smi lists GPUs 0 and 1 only",
            Machine { amd_smi: Some(Ok(AMD_SMI_PLAIN)), ..Machine::default() },
        ),
        (
            "no amd-smi: rocm-smi answers",
            Machine { amd_smi: None, sysfs: vec![], ..Machine::default() },
        ),
        (
            "amd-smi and rocm-smi fail: sysfs answers, GPU 2 busy",
            Machine {
                amd_smi: Some(Ok("AMDSMI_STATUS_DRIVER_NOT_LOADED\n")),
                rocm_smi: Some(Err("exit status: 1: ERROR: GPU[0] : Unable to get VRAM")),
                sysfs: vec![("renderD144", 180_000, 196_592), ("renderD152", 283, 196_592)],
                ..Machine::default()
            },
        ),
        (
            "no tool and no sysfs",
            Machine { amd_smi: None, rocm_smi: None, sysfs: vec![], ..Machine::default() },
        ),
        (
            "amd-smi gives N/A: sysfs for GPU 2, none for GPU 3",
            Machine {
                amd_smi: Some(Ok(
                    r#"[{"gpu": 2, "mem_usage": {"total_vram": "N/A", "used_vram": "N/A"}},
                                     {"gpu": 3, "mem_usage": {"total_vram": "N/A", "used_vram": "N/A"}}]"#,
                )),
                sysfs: vec![("renderD144", 283, 196_592)],
                ..Machine::default()
            },
        ),
        (
            "a render node and /dev/kfd missing",
            Machine { render_nodes: vec!["renderD144"], kfd: false, ..Machine::default() },
        ),
        (
            "a GPU with no memory",
            Machine {
                amd_smi: Some(Ok(
                    r#"[{"gpu": 2, "mem_usage": {"total_vram": 0, "used_vram": 0}}, {"gpu": 3, "mem_usage": {"total_vram": 8, "used_vram": 0}}]"#,
                )),
                ..Machine::default()
            },
        ),
        (
            "checkpoints missing, empty, unknown; each named once",
            Machine {
                store: vec![("qwen/Qwen3", false)],
                needed: vec!["llama", "qwen", "gpt-oss", "llama"],
                ..Machine::default()
            },
        ),
        (
            "too little disk",
            Machine {
                thresholds: Thresholds {
                    min_free_work_bytes: 1 << 50,
                    min_free_cache_bytes: 1 << 50,
                    ..Thresholds::default()
                },
                ..Machine::default()
            },
        ),
        (
            "the image is missing",
            Machine {
                image: Some(Err("no such image: lmsysorg/sglang:v0.5.5-rocm700-mi30x")),
                ..Machine::default()
            },
        ),
        ("no image check (the local executor)", Machine { image: None, ..Machine::default() }),
        (
            "all at once",
            Machine {
                amd_smi: Some(Ok(AMD_SMI_GPU_DATA)),
                kfd: false,
                store: vec![],
                image: Some(Err("no such image")),
                ..Machine::default()
            },
        ),
    ];
    let rendered: Vec<String> =
        cases.into_iter().map(|(name, machine)| format!("== {name}\n{}", check(machine))).collect();
    insta::assert_snapshot!(rendered.join("\n\n"));
}

#[test]
fn the_gravest_reason_names_a_failed_preflight() {
    let finding = |check| Finding { check, subject: "s".to_owned(), problem: "p".to_owned() };
    let cases = [
        (vec![PreflightCheck::Checkpoint], NotRunReason::NoCheckpoint, false),
        (vec![PreflightCheck::Checkpoint, PreflightCheck::Disk], NotRunReason::Other, true),
        (vec![PreflightCheck::Image], NotRunReason::Other, true),
        (vec![PreflightCheck::GpuMemory], NotRunReason::Other, true),
        (
            vec![PreflightCheck::Disk, PreflightCheck::GpuVisible],
            NotRunReason::HardwareAbsent,
            true,
        ),
    ];
    for (checks, reason, blocks) in cases {
        let failure =
            PreflightFailure { findings: checks.iter().map(|check| finding(*check)).collect() };
        assert_eq!(failure.to_not_run().0, reason, "{checks:?}");
        assert_eq!(failure.blocks_run(), blocks, "{checks:?}");
    }
    let failure = PreflightFailure {
        findings: vec![
            Finding {
                check: PreflightCheck::Checkpoint,
                subject: "llama".to_owned(),
                problem: "gone".to_owned(),
            },
            finding(PreflightCheck::Disk),
        ],
    };
    assert_eq!(failure.to_string(), "preflight: llama: gone; s: p");
    assert_eq!(
        failure.missing_checkpoint("llama").map(|finding| finding.problem.as_str()),
        Some("gone")
    );
    assert_eq!(failure.missing_checkpoint("s"), None);
}

#[test]
fn the_default_thresholds() {
    let defaults = Thresholds::default();
    assert_eq!(defaults.min_free_vram_percent, 90);
    assert_eq!(defaults.min_free_work_bytes, 50 << 30);
    assert_eq!(defaults.min_free_cache_bytes, 10 << 30);
}

const AMD_SMI_ECC_LIST: &str = include_str!("fixtures/amd-smi-metric-ecc.json");
const AMD_SMI_PROCESSES: &str = include_str!("fixtures/amd-smi-process-gpu-data.json");
const ROCM_SMI_PIDS_OUT: &str = include_str!("fixtures/rocm-smi-showpids.json");

#[test]
fn gpu_health_over_fake_machines() {
    let ecc = |answer| ("amd-smi", AMD_SMI_ECC, answer);
    let processes = |answer| ("amd-smi", AMD_SMI_PROCESS, answer);
    let busy = Machine { amd_smi: Some(Ok(AMD_SMI_GPU_DATA)), ..Machine::default() };
    let cases = [
        (
            "ECC: GPU 2 over the correctable limit, GPU 3 with uncorrectable errors",
            Machine { more: vec![ecc(Answer::Prints(AMD_SMI_ECC_LIST))], ..Machine::default() },
        ),
        (
            "ECC: a higher correctable limit in the profile",
            Machine {
                more: vec![ecc(Answer::Prints(AMD_SMI_ECC_LIST))],
                health: "max-correctable-ecc = 1000",
                ..Machine::default()
            },
        ),
        (
            "ECC: N/A from amd-smi, no RAS folder",
            Machine {
                more: vec![ecc(Answer::Prints(
                    r#"[{"gpu": 2, "ecc": {"total_correctable_count": "N/A", "total_uncorrectable_count": "N/A"}}, {"gpu": 3}]"#,
                ))],
                ..Machine::default()
            },
        ),
        (
            "ECC: amd-smi fails, the driver's RAS counters answer",
            Machine {
                more: vec![ecc(Answer::Fails("exit status: 1: AMDSMI_STATUS_NOT_SUPPORTED"))],
                ras: vec![
                    ("renderD144", "umc_err_count", "ue: 0\nce: 3\n"),
                    ("renderD152", "umc_err_count", "ue: 0\nce: 0\n"),
                    ("renderD152", "gfx_err_count", "ue: 1\nce: 0\n"),
                    ("renderD152", "features", "feature mask: 0x3fff\n"),
                ],
                ..Machine::default()
            },
        ),
        (
            "GPU 3 busy, held by a process that is gone; GPU 2's is alive",
            Machine {
                more: vec![processes(Answer::Prints(AMD_SMI_PROCESSES))],
                alive: vec![4242],
                ..busy.clone()
            },
        ),
        (
            "GPU 3 busy, held by a live process: busy, not a fault",
            Machine {
                more: vec![processes(Answer::Prints(AMD_SMI_PROCESSES))],
                alive: vec![4242, 28389],
                ..busy.clone()
            },
        ),
        (
            "GPU 3 busy and amd-smi lists no process on it",
            Machine {
                more: vec![processes(Answer::Prints(
                    r#"[{"gpu": 2, "process_list": [{"process_info": "No running processes detected"}]}, {"gpu": 3, "process_list": []}]"#,
                ))],
                ..busy.clone()
            },
        ),
        (
            "no amd-smi process list: rocm-smi's pids, one gone",
            Machine {
                more: vec![
                    processes(Answer::Fails("exit status: 2")),
                    ("rocm-smi", ROCM_SMI_PIDS, Answer::Prints(ROCM_SMI_PIDS_OUT)),
                ],
                alive: vec![4242],
                ..Machine::default()
            },
        ),
        (
            "amd-smi hangs: rocm-smi answers, amd-smi is asked nothing more",
            Machine {
                amd_smi: None,
                more: vec![
                    ("amd-smi", AMD_SMI_MEMORY, Answer::Hangs),
                    ecc(Answer::Prints(AMD_SMI_ECC_LIST)),
                ],
                ..Machine::default()
            },
        ),
        (
            "tool paths from the profile",
            Machine {
                amd_smi: None,
                rocm_smi: None,
                more: vec![
                    ("/opt/rocm-7.0/bin/amd-smi", AMD_SMI_MEMORY, Answer::Prints(AMD_SMI_GPU_DATA)),
                    ("/opt/rocm-7.0/bin/amd-smi", AMD_SMI_ECC, Answer::Hangs),
                ],
                health: "amd-smi = \"/opt/rocm-7.0/bin/amd-smi\"\nrocm-smi = \"/nowhere/rocm-smi\"",
                ..Machine::default()
            },
        ),
    ];
    let rendered: Vec<String> =
        cases.into_iter().map(|(name, machine)| format!("== {name}\n{}", check(machine))).collect();
    insta::assert_snapshot!(rendered.join("\n\n"));
}

#[test]
fn node_faults_are_strikes_and_stop_the_run_as_the_nodes() {
    let finding = |check| Finding { check, subject: "s".to_owned(), problem: "p".to_owned() };
    let checks = [
        (PreflightCheck::GpuEcc, true),
        (PreflightCheck::GpuLeftoverMemory, true),
        (PreflightCheck::GpuResponsive, true),
        (PreflightCheck::GpuMemory, false),
        (PreflightCheck::GpuVisible, false),
        (PreflightCheck::Disk, false),
        (PreflightCheck::Checkpoint, false),
        (PreflightCheck::Image, false),
    ];
    for (check, fault) in checks {
        assert_eq!(check.is_node_fault(), fault, "{check:?}");
        let failure =
            PreflightFailure { findings: vec![finding(check), finding(PreflightCheck::Disk)] };
        assert_eq!(failure.node_faults().count(), usize::from(fault), "{check:?}");
        if fault {
            assert_eq!(failure.to_not_run().0, NotRunReason::Node, "{check:?}");
        }
    }
}

#[test]
fn one_free_disk_floor_serves_the_work_and_the_cache_directory() {
    let default = Thresholds::default();
    for (gib, work, cache) in [
        (None, default.min_free_work_bytes, default.min_free_cache_bytes),
        (Some(0), 0, 0),
        (Some(3), 3 * GIB, 3 * GIB),
        (Some(u64::MAX), u64::MAX, u64::MAX),
    ] {
        let thresholds = Thresholds::with_min_free_disk(gib);
        assert_eq!(
            (thresholds.min_free_work_bytes, thresholds.min_free_cache_bytes),
            (work, cache),
            "{gib:?}"
        );
        assert_eq!(thresholds.min_free_vram_percent, default.min_free_vram_percent);
    }
}

/// A node of GPUs 2 and 3 (render nodes 144 and 152) under a temporary folder, whose sysfs
/// gives GPU 3 1000 MiB used and 5% busy; its root is `<dir>/root`.
fn reading_node() -> (tempfile::TempDir, NodeProfile) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let device = dir.path().join("root/sys/class/drm/renderD152/device");
    std::fs::create_dir_all(&device).expect("the device folder");
    std::fs::write(device.join("mem_info_vram_total"), format!("{}\n", 196_592 * MIB))
        .expect("total");
    std::fs::write(device.join("mem_info_vram_used"), format!("{}\n", 1_000 * MIB)).expect("used");
    std::fs::write(device.join("gpu_busy_percent"), "5\n").expect("busy");
    let profile = format!(
        "name = \"n\"\nhardware = \"mi300x\"\ncheckpoint-store = \"{tmp}\"\ncache-dir = \"{tmp}\"\nwork-dir = \"{tmp}\"\n[gpus]\nids = [2, 3]\nrender-devices = [\"/dev/dri/renderD144\", \"/dev/dri/renderD152\"]\n[image]\nname = \"i\"\n",
        tmp = dir.path().display()
    );
    let node = NodeProfile::parse(&profile, "node.toml").expect("the profile");
    (dir, node)
}

/// A release check's reading of `node`'s GPUs `ids` under `root`, the tools answering
/// `answers`, each GPU rendered by `render`, the root shown as `[root]`.
fn read_rendered(
    (node, root): (&NodeProfile, &Path),
    answers: &[(&str, &[&str], Answer)],
    ids: &[u32],
    render: fn(GpuReading) -> String,
) -> String {
    let mut commands = FakeCommands::default();
    for (program, args, answer) in answers {
        commands.answers.insert(command(program, args), answer.clone());
    }
    let probes = Probes { commands: &commands, root };
    read_gpus(node, probes, ids)
        .into_iter()
        .map(render)
        .collect::<Vec<_>>()
        .join("\n")
        .replace(&root.display().to_string(), "[root]")
}

#[test]
fn a_reading_of_some_gpus_takes_the_preflights_sources_in_its_order() {
    let (dir, node) = reading_node();
    let root = dir.path().join("root");
    let rendered = |answers: &[(&str, &[&str], Answer)], ids: &[u32]| {
        read_rendered((&node, &root), answers, ids, |GpuReading { id, memory, .. }| match memory {
            Ok((vram, source)) => {
                format!("{id}: {}/{} MiB ({source})", vram.used / MIB, vram.total / MIB)
            }
            Err(problem) => format!("{id}: {problem}"),
        })
    };
    let amd_smi = ("amd-smi", AMD_SMI_MEMORY_AND_USE, Answer::Prints(AMD_SMI_LIST));
    let rocm_smi = ("rocm-smi", ROCM_SMI_MEMORY_AND_USE, Answer::Prints(ROCM_SMI_VRAM));
    let broken = ("amd-smi", AMD_SMI_MEMORY_AND_USE, Answer::Fails("exit status: 1"));
    // amd-smi first; only the GPUs asked, by the node profile's ids.
    assert_eq!(rendered(&[amd_smi, rocm_smi.clone()], &[3]), "3: 283/196592 MiB (amd-smi)");
    // rocm-smi when amd-smi gives no answer; sysfs when neither does.
    assert_eq!(rendered(&[broken.clone(), rocm_smi], &[2]), "2: 283/196592 MiB (rocm-smi)");
    assert_eq!(rendered(std::slice::from_ref(&broken), &[3]), "3: 1000/196592 MiB (sysfs)");
    // Nothing to read: each source's problem, never a figure.
    assert_eq!(
        rendered(&[broken], &[2, 7]),
        "2: amd-smi: exit status: 1; rocm-smi: cannot start: No such file or directory (os error 2); sysfs: cannot read [root]/sys/class/drm/renderD144/device/mem_info_vram_total: No such file or directory (os error 2)\n7: the node profile lists no GPU 7"
    );
}

#[test]
fn a_reading_gives_how_busy_each_gpu_is_from_the_call_that_gave_its_memory_else_sysfs() {
    let (dir, node) = reading_node();
    let root = dir.path().join("root");
    let rendered = |answers: &[(&str, &[&str], Answer)], ids: &[u32]| {
        read_rendered((&node, &root), answers, ids, |GpuReading { id, busy, .. }| match busy {
            Ok((percent, source)) => format!("{id}: {percent}% busy ({source})"),
            Err(problem) => format!("{id}: {problem}"),
        })
    };
    // GPU 2 and 3 are the tools' GPUs 2 and 3; amd-smi's fixture lists GPUs 0 and 1 only.
    let two_busy = r#"[{"gpu": 2, "usage": {"gfx_activity": {"value": 100, "unit": "%"}}, "mem_usage": {}}, {"gpu": 3, "usage": "N/A"}]"#;
    let amd_smi = ("amd-smi", AMD_SMI_MEMORY_AND_USE, Answer::Prints(two_busy));
    let broken = ("amd-smi", AMD_SMI_MEMORY_AND_USE, Answer::Fails("exit status: 1"));
    let rocm_smi = ("rocm-smi", ROCM_SMI_MEMORY_AND_USE, Answer::Prints(ROCM_SMI_USE));
    // The tool that answered gives it; a GPU it gives no activity for is read from sysfs.
    assert_eq!(rendered(&[amd_smi], &[2, 3]), "2: 100% busy (amd-smi)\n3: 5% busy (sysfs)");
    // rocm-smi's "GPU use (%)" when amd-smi gives no answer (its card 2 has none, and sysfs has
    // no figure for GPU 2): each source's problem, never a figure.
    assert_eq!(
        rendered(&[broken.clone(), rocm_smi], &[2]),
        "2: rocm-smi gives no activity; sysfs: cannot read [root]/sys/class/drm/renderD144/device/gpu_busy_percent: No such file or directory (os error 2)"
    );
    assert_eq!(rendered(std::slice::from_ref(&broken), &[3]), "3: 5% busy (sysfs)");
    assert_eq!(rendered(&[broken], &[7]), "7: the node profile lists no GPU 7");
}
