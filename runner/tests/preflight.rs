//! The preflight through real processes: fake `amd-smi` and `rocm-smi` scripts on the `PATH`
//! of [`SystemCommands`] print the tools' outputs (the fixtures of `runner/src/preflight/`),
//! fail or hang, over a fake device and sysfs tree; the container tests' stand-in engine
//! answers the image question.

#![expect(
    clippy::disallowed_methods,
    reason = "the tests start the real tools the preflight reads"
)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use prgate_gate::evidence::NotRunReason;
use prgate_runner::container::Engine;
use prgate_runner::node::NodeProfile;
use prgate_runner::preflight::{
    ImageCheck, Preflight, PreflightCheck, PreflightFailure, Probes, SystemCommands, Thresholds,
};
use prgate_runner::process::Environment;

const AMD_SMI_LIST: &str = include_str!("../src/preflight/fixtures/amd-smi-metric-mem-usage.json");
const AMD_SMI_GPU_DATA: &str =
    include_str!("../src/preflight/fixtures/amd-smi-metric-mem-usage-gpu-data.out");
const ROCM_SMI_VRAM: &str =
    include_str!("../src/preflight/fixtures/rocm-smi-showmeminfo-vram.json");

const MIB: u64 = 1024 * 1024;

/// A node with GPUs 2 and 3, their render nodes, `/dev/kfd` and a checkpoint, in a temp dir.
struct Machine {
    dir: tempfile::TempDir,
    node: NodeProfile,
}

/// The node's image in [`Machine::new`]'s profile.
const IMAGE: &str = "lmsysorg/sglang:v0.5.5-rocm700-mi30x";

impl Machine {
    fn new() -> Machine {
        Machine::with_image(&format!("name = \"{IMAGE}\""))
    }

    /// A machine whose profile's `[image]` table is `image`.
    fn with_image(image: &str) -> Machine {
        let dir = tempfile::tempdir().expect("a temp dir");
        let tmp = dir.path();
        std::fs::create_dir_all(tmp.join("root/dev/dri")).expect("dev/dri");
        for node in ["dri/renderD144", "dri/renderD152", "kfd"] {
            std::fs::write(tmp.join("root/dev").join(node), "").expect("a device node");
        }
        std::fs::create_dir_all(tmp.join("bin")).expect("the fake tools' folder");
        std::fs::create_dir_all(tmp.join("models/meta/Llama-4")).expect("a checkpoint");
        std::fs::write(tmp.join("models/meta/Llama-4/config.json"), "{}").expect("config.json");
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
{image}
[checkpoints]
llama = "meta/Llama-4"
"#,
            tmp = tmp.display()
        );
        let node = NodeProfile::parse(&profile, "node.toml").expect("the profile");
        Machine { dir, node }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// A fake tool `name` that checks it was called as `argv` and then runs `body` (sh).
    fn tool(&self, name: &str, argv: &str, body: &str) {
        let script = format!(
            "#!/bin/sh\n[ \"$*\" = \"{argv}\" ] || {{ echo \"called as: $*\" >&2; exit 2; }}\n{body}\n"
        );
        let path = self.path("bin").join(name);
        std::fs::write(&path, script).expect("a fake tool");
        let mut permissions = std::fs::metadata(&path).expect("the tool").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        std::fs::set_permissions(&path, permissions).expect("an executable tool");
    }

    /// A fake tool that prints `output`, written to a file beside it (sh builtins only).
    fn tool_printing(&self, name: &str, argv: &str, output: &str) {
        let file = self.path("bin").join(format!("{name}.out"));
        std::fs::write(&file, output).expect("the tool's output");
        let body = format!(
            "while IFS= read -r line || [ -n \"$line\" ]; do printf '%s\\n' \"$line\"; done < '{}'",
            file.display()
        );
        self.tool(name, argv, &body);
    }

    fn sysfs(&self, node: &str, used_mib: u64, total_mib: u64) {
        let device = self.path("root/sys/class/drm").join(node).join("device");
        std::fs::create_dir_all(&device).expect("the device folder");
        std::fs::write(device.join("mem_info_vram_total"), format!("{}\n", total_mib * MIB))
            .expect("total");
        std::fs::write(device.join("mem_info_vram_used"), format!("{}\n", used_mib * MIB))
            .expect("used");
    }

    /// The preflight with only the fake tools on `PATH` and commands cut after `timeout`.
    fn run(&self, timeout: Duration) -> Result<(), PreflightFailure> {
        self.run_with_image(timeout, None)
    }

    fn run_with_image(
        &self,
        timeout: Duration,
        image_check: Option<&dyn ImageCheck>,
    ) -> Result<(), PreflightFailure> {
        let commands = SystemCommands {
            env: Environment::empty().set("PATH", self.path("bin")),
            timeout,
            ..SystemCommands::new(&self.path("work/preflight"))
        };
        let root = self.path("root");
        let checkpoints = ["llama".to_owned()];
        Preflight {
            node: &self.node,
            checkpoints: &checkpoints,
            thresholds: Thresholds {
                min_free_work_bytes: 0,
                min_free_cache_bytes: 0,
                ..Thresholds::default()
            },
            probes: Probes { commands: &commands, root: &root },
            image_check,
        }
        .run()
    }

    fn log(&self, program: &str) -> String {
        std::fs::read_to_string(self.path("work/preflight").join(format!("{program}.log")))
            .unwrap_or_default()
    }
}

const AMD_SMI_ARGS: &str = "metric --mem-usage --json";
const ROCM_SMI_ARGS: &str = "--showmeminfo vram --json";

fn only_finding(result: Result<(), PreflightFailure>) -> (PreflightCheck, String, NotRunReason) {
    let failure = result.expect_err("a finding");
    assert_eq!(failure.findings().len(), 1, "{failure}");
    let finding = &failure.findings()[0];
    (finding.check, finding.to_string(), failure.to_not_run().0)
}

#[test]
fn amd_smi_answers_and_a_busy_gpu_is_a_finding() {
    let machine = Machine::new();
    machine.tool_printing("amd-smi", AMD_SMI_ARGS, AMD_SMI_GPU_DATA);
    machine.tool("rocm-smi", ROCM_SMI_ARGS, "echo 'rocm-smi must not be asked' >&2; exit 1");
    let (check, finding, reason) = only_finding(machine.run(Duration::from_secs(30)));
    assert_eq!(check, PreflightCheck::GpuMemory);
    assert_eq!(
        finding,
        "GPU 3 (/dev/dri/renderD152): 19.2 GiB of 192.0 GiB free (amd-smi); a run needs 90% free: \
         is another process using it?"
    );
    assert_eq!(reason, NotRunReason::Other);
    assert!(machine.log("amd-smi").contains("\"gpu_data\""), "the output is kept");
    assert_eq!(machine.log("rocm-smi"), "", "rocm-smi was not asked");
}

#[test]
fn a_failing_amd_smi_falls_back_to_rocm_smi() {
    let machine = Machine::new();
    machine.tool("amd-smi", AMD_SMI_ARGS, "echo 'AMDSMI_STATUS_DRIVER_NOT_LOADED' >&2; exit 1");
    machine.tool_printing("rocm-smi", ROCM_SMI_ARGS, ROCM_SMI_VRAM);
    assert_eq!(machine.run(Duration::from_secs(30)), Ok(()));
    assert!(machine.log("amd-smi").contains("AMDSMI_STATUS_DRIVER_NOT_LOADED"));
    assert!(machine.log("rocm-smi").contains("VRAM Total Memory (B)"));
}

#[test]
fn a_hanging_amd_smi_is_stopped_and_is_a_hung_device() {
    let machine = Machine::new();
    machine.tool("amd-smi", AMD_SMI_ARGS, "exec /bin/sleep 60");
    machine.tool_printing("rocm-smi", ROCM_SMI_ARGS, ROCM_SMI_VRAM);
    let started = Instant::now();
    // rocm-smi gives the memory; the hang is the finding, and amd-smi is asked nothing more.
    let (check, finding, reason) = only_finding(machine.run(Duration::from_secs(1)));
    assert_eq!(check, PreflightCheck::GpuResponsive);
    assert_eq!(
        finding,
        "amd-smi: `amd-smi metric --mem-usage --json` gave no answer within 1s and was stopped: \
         a hung GPU or driver"
    );
    assert_eq!(reason, NotRunReason::Node);
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(1), "amd-smi was given its second: {took:?}");
    assert!(took < Duration::from_secs(20), "amd-smi was stopped: {took:?}");
}

#[test]
fn without_tools_sysfs_answers_and_a_missing_gpu_is_hardware_absent() {
    let machine = Machine::new();
    machine.sysfs("renderD144", 283, 196_592);
    machine.sysfs("renderD152", 283, 196_592);
    assert_eq!(machine.run(Duration::from_secs(30)), Ok(()));

    machine.sysfs("renderD144", 190_000, 196_592);
    let (check, finding, _reason) = only_finding(machine.run(Duration::from_secs(30)));
    assert_eq!(check, PreflightCheck::GpuMemory);
    assert!(finding.contains("6.4 GiB of 192.0 GiB free (sysfs)"), "{finding}");

    machine.sysfs("renderD144", 283, 196_592);
    std::fs::remove_file(machine.path("root/dev/dri/renderD152")).expect("GPU 3 gone");
    let (check, finding, reason) = only_finding(machine.run(Duration::from_secs(30)));
    assert_eq!(check, PreflightCheck::GpuVisible);
    assert_eq!(finding, "GPU 3 (/dev/dri/renderD152): its render node does not exist");
    assert_eq!(reason, NotRunReason::HardwareAbsent);
}

#[test]
fn a_missing_checkpoint_stops_only_its_models() {
    let machine = Machine::new();
    machine.tool_printing("rocm-smi", ROCM_SMI_ARGS, ROCM_SMI_VRAM);
    std::fs::remove_dir_all(machine.path("models/meta")).expect("the checkpoint gone");
    let failure = machine.run(Duration::from_secs(30)).expect_err("a finding");
    assert!(!failure.blocks_run(), "{failure}");
    let finding = failure.missing_checkpoint("llama").expect("the checkpoint's finding");
    let (reason, detail) = finding.to_not_run();
    assert_eq!(reason, NotRunReason::NoCheckpoint);
    let store = Path::new(machine.node.checkpoint_store());
    assert_eq!(
        detail,
        format!("preflight: llama: {} does not exist", store.join("meta/Llama-4").display())
    );
}

/// The container tests' stand-in engine (`runner/tests/fixtures/fake-engine`) behind a
/// `docker` wrapper, holding `images`.
fn stand_in_engine(machine: &Machine, images: serde_json::Value) -> Engine {
    let state = machine.path("engine");
    let bin = machine.path("engine-bin");
    // `fake-engine install`: the `docker` wrapper in `bin`, the state with `images`.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-engine");
    let status = std::process::Command::new(&fixture)
        .arg("install")
        .args([bin.as_os_str(), state.as_os_str()])
        .arg(images.to_string())
        .status()
        .expect("the stand-in engine runs");
    assert!(status.success(), "fake-engine install: {status}");
    Engine::detect(Some(bin.as_os_str())).expect("the wrapper is found")
}

#[test]
fn the_container_engine_answers_the_image_question() {
    const DIGEST: &str = "sha256:4f1c2a9e0b7d3c5a8e6f1b2d4c9a7e3f5b8d1c6a2e9f4b7d3c5a8e1f6b2d9c4a";
    const OTHER: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    let image = serde_json::json!([{
        "id": "sha256:1111111111111111111111111111111111111111111111111111111111111111",
        "names": [IMAGE],
        "repo_digests": [format!("lmsysorg/sglang@{DIGEST}")],
    }]);
    let cases = [
        (format!("name = \"{IMAGE}\""), image.clone(), None),
        (format!("name = \"{IMAGE}\"\ndigest = \"{DIGEST}\""), image.clone(), None),
        (
            format!("name = \"{IMAGE}\"\ndigest = \"{OTHER}\""),
            image,
            // The engine is asked for `name@digest`, which it does not have.
            Some(format!("No such image: {IMAGE}@{OTHER}")),
        ),
        (
            format!("name = \"{IMAGE}\""),
            serde_json::json!([]),
            Some(format!("No such image: {IMAGE}")),
        ),
    ];
    for (table, images, expect) in cases {
        let machine = Machine::with_image(&table);
        machine.tool_printing("amd-smi", AMD_SMI_ARGS, AMD_SMI_LIST);
        let engine = stand_in_engine(&machine, images);
        let result = machine.run_with_image(Duration::from_secs(30), Some(&engine));
        match expect {
            None => assert_eq!(result, Ok(()), "{table}"),
            Some(expect) => {
                let (check, finding, reason) = only_finding(result);
                assert_eq!(check, PreflightCheck::Image, "{table}");
                assert!(finding.starts_with(&format!("{IMAGE}: ")), "{finding}");
                assert!(finding.contains(&expect), "{table}: {finding}");
                assert_eq!(reason, NotRunReason::Other);
            }
        }
    }
}
