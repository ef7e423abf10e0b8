//! The container launcher against a container engine, through `prgate_runner::container`.
//!
//! Every test runs its assertions for each engine: the stand-in (`tests/fixtures/fake-engine`,
//! see its header and `docs/container.md`) always, and the real engine whose client
//! `PRGATE_TEST_ENGINE` names (`.ci/test` sets up podman and names it), with the image
//! `PRGATE_TEST_IMAGE` (default `python:3.12-slim`; it needs `python3`), pulled once when
//! missing. Under CI (`CI` set) a missing `PRGATE_TEST_ENGINE` fails every test, and a named
//! engine that does not answer fails it anywhere: the real half is never dropped silently. What the stand-in cannot
//! show (a read-only mount refusing a write) is asserted from the command line and from the
//! stand-in's record of the mount on it, and from behaviour on a real engine.
//!
//! This file holds the harness (and the secret test, which reruns this binary by its name);
//! the other tests are in submodules by topic.

#![expect(
    clippy::disallowed_methods,
    reason = "the tests drive the real container engine and rerun this binary"
)]

mod isolation;
mod lifecycle;
mod network;

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use prgate_runner::container::{
    Container, ContainerEnv, ContainerError, ContainerNetwork, ContainerRequest, DEFAULT_SHM_GIB,
    Engine, EngineKind, GatewayCheck, Launch, NetworkSide, RunId, image_reference,
    side_network_name,
};
use prgate_runner::node::NodeProfile;
use prgate_runner::process::{Finished, wait_healthy};
use serde_json::Value;

/// The stand-in's image: its name, id and the digest the test node pins.
const STAND_IN_IMAGE: &str = "prgate-test/python:3";
const STAND_IN_ID: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const STAND_IN_DIGEST: &str =
    "sha256:2222222222222222222222222222222222222222222222222222222222222222";
/// The real engine's image unless `PRGATE_TEST_IMAGE` names another.
const DEFAULT_REAL_IMAGE: &str = "python:3.12-slim";
/// What a probe's run may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(120);

/// One engine to run a test against.
struct Harness {
    engine: Engine,
    /// The image's name with its tag.
    image: String,
    /// The digest the node pins, when the image has one.
    digest: Option<String>,
    /// The stand-in's state directory; `None` for a real engine.
    stand_in: Option<PathBuf>,
    /// The render devices the test node lists.
    render_devices: Vec<String>,
    /// Whether containers may really be given the GPU devices (a real engine on a node with
    /// `/dev/kfd`, or the stand-in, which records them).
    gpus_usable: bool,
    _dir: Option<tempfile::TempDir>,
}

impl Harness {
    fn name(&self) -> String {
        match self.stand_in {
            Some(_) => "the stand-in".to_owned(),
            None => format!("{} ({})", self.engine.kind(), self.engine.program().display()),
        }
    }

    fn real(&self) -> bool {
        self.stand_in.is_none()
    }

    /// Every invocation the stand-in recorded: `argv` and `client_env`.
    fn invocations(&self) -> Vec<Value> {
        let Some(dir) = &self.stand_in else { return Vec::new() };
        std::fs::read_to_string(dir.join("log.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
            .filter(|record| record.get("argv").is_some())
            .collect()
    }

    /// The stand-in's state.
    fn state(&self) -> Value {
        let dir = self.stand_in.as_ref().expect("the stand-in");
        let text = std::fs::read_to_string(dir.join("state.json")).expect("the state");
        serde_json::from_str(&text).expect("JSON")
    }

    /// Runs the engine's client directly (the test's own view of the engine).
    fn client(&self, args: &[&str]) -> std::process::Output {
        Command::new(self.engine.program())
            .args(args)
            .env_clear()
            .envs(self.engine.client_environment().vars())
            .stdin(Stdio::null())
            .output()
            .expect("the engine client runs")
    }

    /// Whether a container of that name or id exists, running or not.
    fn exists(&self, name: &str) -> bool {
        self.client(&["port", name, "1/tcp"])
            .stderr
            .to_ascii_lowercase()
            .windows(17)
            .all(|window| window != b"no such container" && window != b"no container with")
    }

    /// The names of the variables a container of the image has before `-e`: `PATH` for the
    /// stand-in; the image's own, `HOSTNAME` and `HOME` for a real engine.
    fn baseline_variables(&self) -> Vec<String> {
        if !self.real() {
            return vec!["PATH".to_owned()];
        }
        let output =
            self.client(&["image", "inspect", "--format", "{{json .Config.Env}}", &self.image]);
        let env: Vec<String> = serde_json::from_slice(&output.stdout).unwrap_or_default();
        env.iter()
            .filter_map(|pair| pair.split_once('=').map(|(name, _)| name.to_owned()))
            .chain(["HOSTNAME".to_owned(), "HOME".to_owned()])
            .collect()
    }

    /// A node profile for this engine, its checkpoint store in `site`.
    fn node(&self, site: &Site) -> NodeProfile {
        let devices: Vec<String> =
            self.render_devices.iter().map(|device| format!("{device:?}")).collect();
        let ids: Vec<String> = (0..devices.len()).map(|id| id.to_string()).collect();
        let digest =
            self.digest.as_ref().map(|digest| format!("digest = {digest:?}")).unwrap_or_default();
        let text = format!(
            "name = \"test-node\"\nhardware = \"mi355x\"\ncheckpoint-store = {store:?}\n\
             cache-dir = {cache:?}\nwork-dir = {work:?}\nsecrets = [\"HF_TOKEN\"]\n\
             [gpus]\nids = [{ids}]\nrender-devices = [{devices}]\n\
             [image]\nname = {image:?}\n{digest}\n[checkpoints]\n\"ckpt\" = \"org/ckpt\"\n",
            store = site.store.display().to_string(),
            cache = site.root().join("cache").display().to_string(),
            work = site.root().join("work").display().to_string(),
            ids = ids.join(", "),
            devices = devices.join(", "),
            image = self.image,
        );
        NodeProfile::parse(&text, "test-node.toml").expect("the test node parses")
    }
}

/// Runs `test` against every engine of this machine, the stand-in first.
fn for_each_engine(test: impl Fn(&Harness)) {
    let mut engines = vec![stand_in()];
    engines.extend(real_engine());
    for harness in &engines {
        eprintln!("engine: {}", harness.name());
        test(harness);
    }
}

/// The stand-in, behind a wrapper named `docker` that tells it where its state is.
fn stand_in() -> Harness {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let state = dir.path().join("engine");
    let bin = dir.path().join("bin");
    let images = serde_json::json!([{
        "id": STAND_IN_ID,
        "names": [STAND_IN_IMAGE],
        "repo_digests": [format!("prgate-test/python@{STAND_IN_DIGEST}")],
    }]);
    install_stand_in(&bin, &state, &images);
    let engine = Engine::detect(Some(bin.as_os_str())).expect("the wrapper is found");
    assert_eq!(engine.kind(), EngineKind::Docker);
    Harness {
        engine,
        image: STAND_IN_IMAGE.to_owned(),
        digest: Some(STAND_IN_DIGEST.to_owned()),
        stand_in: Some(state),
        render_devices: vec!["/dev/dri/renderD128".to_owned(), "/dev/dri/renderD136".to_owned()],
        gpus_usable: true,
        _dir: Some(dir),
    }
}

/// `fake-engine install`: the `docker` wrapper in `bin`, the state in `state` with `images`.
fn install_stand_in(bin: &Path, state: &Path, images: &serde_json::Value) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake-engine");
    let status = std::process::Command::new(&fixture)
        .arg("install")
        .args([bin.as_os_str(), state.as_os_str()])
        .arg(images.to_string())
        .status()
        .expect("the stand-in engine runs");
    assert!(status.success(), "fake-engine install: {status}");
}

/// The variable that names the real engine's client to test (`/usr/bin/podman`); `.ci/test`
/// sets it. Without it only the stand-in is tested, and under CI (`CI` set) that is a failure.
const ENGINE_VARIABLE: &str = "PRGATE_TEST_ENGINE";

/// The real engine `PRGATE_TEST_ENGINE` names, with the test image present. An engine that is
/// named but does not answer `info`, or a CI run that names none, fails the test: the
/// real-engine half is never dropped without a word.
fn real_engine() -> Option<Harness> {
    static FOUND: OnceLock<Option<(Engine, String, Option<String>)>> = OnceLock::new();
    let (engine, image, digest) = FOUND
        .get_or_init(|| {
            let Some(program) = std::env::var_os(ENGINE_VARIABLE).filter(|value| !value.is_empty())
            else {
                let ci = std::env::var_os("CI").is_some_and(|value| !value.is_empty());
                assert!(
                    !ci,
                    "CI is set but {ENGINE_VARIABLE} is not: the container tests must run on a \
                     real engine in CI\nhint: run them through .ci/test, which sets up podman"
                );
                eprintln!(
                    "engine: no real engine ({ENGINE_VARIABLE} is unset): only the stand-in is \
                     tested; .ci/test sets up podman and names it"
                );
                return None;
            };
            let engine = Engine::at(program);
            let mut info = Command::new(engine.program());
            info.arg("info").env_clear().envs(engine.client_environment().vars());
            assert!(
                succeeds_within(&mut info, Duration::from_secs(60)),
                "{ENGINE_VARIABLE}={} does not answer `info` within a minute\nhint: is its \
                 daemon up, and CONTAINERS_CONF set for podman? (.ci/engine-up)",
                engine.program().display()
            );
            let image = std::env::var("PRGATE_TEST_IMAGE")
                .unwrap_or_else(|_| DEFAULT_REAL_IMAGE.to_owned());
            if engine.image_info(&image).is_err() {
                let pulled = Command::new(engine.program()).args(["pull", &image]).status();
                assert!(
                    pulled.is_ok_and(|status| status.success()),
                    "{} answers `info` but the test image {image} is missing and cannot be pulled\n\
                     hint: set PRGATE_TEST_IMAGE to a local image that has python3",
                    engine.program().display()
                );
            }
            let info = engine.image_info(&image).expect("the test image is there");
            // Pin the digest when the image has one from its own repository, so that the
            // launcher's `name@digest` is exercised too.
            let repository = image.rsplit_once(':').map_or(image.as_str(), |(name, _)| name);
            let digest = info.repo_digests.iter().find_map(|repo_digest| {
                let (repo, digest) = repo_digest.rsplit_once('@')?;
                let short = repository.strip_prefix("docker.io/library/").unwrap_or(repository);
                let repo = repo.strip_prefix("docker.io/library/").unwrap_or(repo);
                (repo == short).then(|| digest.to_owned())
            });
            Some((engine, image, digest))
        })
        .clone()?;
    let mut render_devices: Vec<String> = std::fs::read_dir("/dev/dri")
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
                .filter(|name| name.starts_with("renderD"))
                .map(|name| format!("/dev/dri/{name}"))
                .collect()
        })
        .unwrap_or_default();
    render_devices.sort();
    render_devices.truncate(2);
    let gpus_usable = Path::new("/dev/kfd").exists() && !render_devices.is_empty();
    if !gpus_usable {
        render_devices = vec!["/dev/dri/renderD128".to_owned(), "/dev/dri/renderD136".to_owned()];
    }
    Some(Harness { engine, image, digest, stand_in: None, render_devices, gpus_usable, _dir: None })
}

/// Whether `command` exits with status 0 within `timeout` (it is killed after).
fn succeeds_within(command: &mut Command, timeout: Duration) -> bool {
    let Ok(mut child) =
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn()
    else {
        return false;
    };
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
}

/// The directories of one test: the checkpoint store (with `org/ckpt/config.json`), the
/// tree (with `probe.py` and `hello.txt`), the output directory and the logs.
struct Site {
    dir: tempfile::TempDir,
    store: PathBuf,
    tree: PathBuf,
    out: PathBuf,
}

/// Writes what it sees as JSON to `<out>/probe.json`: its working directory, its environment,
/// a checkpoint file's text, and whether it could write into the checkpoint store (`"ok"`, or
/// the error number).
const PROBE: &str = r#"import json, os, sys
out, checkpoint, models = sys.argv[1:4]
result = {"cwd": os.getcwd(), "env": dict(os.environ)}
try:
    with open(checkpoint) as file:
        result["checkpoint"] = file.read()
except OSError as error:
    result["checkpoint"] = "error: %s" % error
try:
    with open(os.path.join(models, "written-by-a-container"), "w") as file:
        file.write("x")
    result["models_write"] = "ok"
except OSError as error:
    result["models_write"] = error.errno
with open(os.path.join(out, "probe.json"), "w") as file:
    json.dump(result, file)
"#;

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = dir.path().canonicalize().expect("it exists");
        let (store, tree, out) = (root.join("store"), root.join("tree"), root.join("out"));
        for folder in [&store.join("org/ckpt"), &tree, &out] {
            std::fs::create_dir_all(folder).expect("a directory");
        }
        std::fs::write(store.join("org/ckpt/config.json"), "{\"layers\": 2}").expect("a file");
        std::fs::write(tree.join("probe.py"), PROBE).expect("the probe");
        std::fs::write(tree.join("hello.txt"), "hello from the tree").expect("a file");
        // A real engine may run its command as another user than the test's (a remapped
        // root): it must reach the directories and write into the output one.
        use std::os::unix::fs::PermissionsExt;
        for (folder, mode) in [(&root, 0o755), (&store, 0o755), (&tree, 0o755), (&out, 0o777)] {
            std::fs::set_permissions(folder, std::fs::Permissions::from_mode(mode))
                .expect("permissions");
        }
        Site { dir, store, tree, out }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().expect("it exists")
    }

    fn log(&self, name: &str) -> PathBuf {
        self.root().join("logs").join(format!("{name}.log"))
    }

    /// What the probe wrote.
    fn probe(&self) -> Value {
        let text = std::fs::read_to_string(self.out.join("probe.json")).unwrap_or_else(|error| {
            panic!("the probe wrote nothing ({error}); the client's log:\n{}", self.logs())
        });
        serde_json::from_str(&text).expect("the probe's JSON")
    }

    fn logs(&self) -> String {
        std::fs::read_dir(self.root().join("logs"))
            .map(|entries| {
                entries
                    .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }
}

/// A run id no other test (or earlier test run on a real engine) uses.
fn run_id(test: &str) -> RunId {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.subsec_nanos())
        .unwrap_or_default();
    let id = format!(
        "t{}-{nanos}-{}-{test}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    RunId::new(&id).expect("a run id")
}

/// One step to launch.
struct Step<'a> {
    purpose: &'a str,
    gpus: &'a [u32],
    network: ContainerNetwork<'a>,
    env: ContainerEnv,
    command: Vec<String>,
}

impl<'a> Step<'a> {
    /// `command` as the step `purpose`: no GPU, no network.
    fn plain(node: &NodeProfile, purpose: &'a str, command: &[&str]) -> Step<'a> {
        Step {
            purpose,
            gpus: &[],
            network: ContainerNetwork::None,
            env: ContainerEnv::new(node),
            command: strings(command),
        }
    }

    fn probe(node: &NodeProfile) -> Step<'static> {
        Step {
            purpose: "probe",
            gpus: &[],
            network: ContainerNetwork::None,
            env: ContainerEnv::new(node),
            command: strings(&[
                "python3",
                "probe.py",
                "/work/out",
                "/models/org/ckpt/config.json",
                "/models",
            ]),
        }
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

fn launch(
    harness: &Harness,
    site: &Site,
    node: &NodeProfile,
    run: &RunId,
    step: &Step<'_>,
) -> Launch {
    let log = site.log(step.purpose);
    let request = ContainerRequest {
        node,
        run,
        purpose: step.purpose,
        labels: &[("prgate.model", "kimi-k3"), ("prgate.side", "pr")],
        gpus: step.gpus,
        tree: &site.tree,
        out: &site.out,
        env: &step.env,
        network: step.network,
        datasets: None,
        shm_gib: DEFAULT_SHM_GIB,
        command: &step.command,
        log: &log,
        grace: Duration::from_secs(2),
    };
    harness.engine.launch(&request).expect("the request is launched")
}

/// Starts `launch` and waits for it; returns the exit code.
fn run_to_end(harness: &Harness, site: &Site, launch: &Launch) -> i32 {
    let mut container = Container::start(&harness.engine, launch).expect("the client starts");
    match container.wait_with_timeout(STEP_TIMEOUT).expect("it is waited for") {
        Finished::Exited(status) => status.code().unwrap_or(-1),
        Finished::TimedOut(_) => panic!("the step timed out; the log:\n{}", site.logs()),
        Finished::Stalled { .. } => panic!("no stall limit was set; the log:\n{}", site.logs()),
    }
}

fn argv(launch: &Launch) -> Vec<String> {
    launch.spec.argv.iter().map(|arg| arg.to_string_lossy().into_owned()).collect()
}

/// The values given to `flag` among `options`.
fn values<'a>(options: &'a [String], flag: &str) -> Vec<&'a str> {
    options.windows(2).filter(|pair| pair[0] == flag).map(|pair| pair[1].as_str()).collect()
}

/// Every isolation property of a `run` command line, for run `run` of `node`: the options
/// before the image, the command after it, unchanged.
fn assert_isolated(argv: &[String], node: &NodeProfile, run: &RunId, command: &[String]) {
    let image = image_reference(node.image());
    let at = argv.iter().position(|arg| *arg == image).expect("the image is in the argv");
    let (options, rest) = argv.split_at(at);
    assert_eq!(&rest[1..], command, "the command follows the image, unchanged");
    assert_eq!(options[1], "run");
    for forbidden in [
        "--privileged",
        "--network",
        "--net",
        "--ipc",
        "--pid",
        "--uts",
        "--userns",
        "--cap-add",
        "--env-file",
        "-v",
        "--volume",
        "--volumes-from",
        "--device-cgroup-rule",
        "--gpus",
    ] {
        // The network options allowed: none at all, a side's internal network of the run, or
        // a container of the run's namespace.
        let networks =
            [NetworkSide::Base, NetworkSide::Pr].map(|side| side_network_name(run, side));
        let joined = format!("container:prgate-{run}-");
        let allowed_value = |value: &str| {
            value == "none"
                || networks.iter().any(|network| network == value)
                || value.starts_with(&joined)
        };
        let allowed = |at: usize| {
            forbidden == "--network" && options.get(at + 1).is_some_and(|next| allowed_value(next))
        };
        assert!(
            !options.iter().enumerate().any(|(at, arg)| {
                (arg == forbidden || arg.starts_with(&format!("{forbidden}="))) && !allowed(at)
            }),
            "{forbidden} in {options:?}"
        );
    }
    assert!(!options.iter().any(|arg| arg.contains(".sock")), "an engine socket: {options:?}");
    for flag in ["--rm", "--init"] {
        assert!(options.contains(&flag.to_owned()), "{flag} is missing");
    }
    assert_eq!(values(options, "--pull"), ["never"]);
    assert_eq!(values(options, "--security-opt"), ["no-new-privileges"]);
    assert_eq!(values(options, "--workdir"), ["/work/tree"]);
    assert!(values(options, "--label").contains(&format!("prgate.run={run}").as_str()));
    let mounts = values(options, "--mount");
    assert_eq!(mounts.len(), 3, "{mounts:?}");
    let store = node.checkpoint_store().display().to_string();
    assert!(mounts.contains(&format!("type=bind,src={store},dst=/models,readonly").as_str()));
    assert!(mounts.iter().any(|m| m.ends_with(",dst=/work/tree")), "{mounts:?}");
    assert!(mounts.iter().any(|m| m.ends_with(",dst=/work/out")), "{mounts:?}");
    assert!(values(options, "-p").is_empty() && values(options, "--publish").is_empty());
    assert_eq!(values(options, "--network").len(), 1, "one network option: {options:?}");
    let variables = values(options, "-e");
    assert!(
        variables.contains(&"HF_HUB_OFFLINE=1") && variables.contains(&"TRANSFORMERS_OFFLINE=1")
    );
    let home = std::env::var("HOME").unwrap_or_default();
    if !home.is_empty() {
        assert!(!mounts.iter().any(|m| m.contains(&format!("src={home},"))), "{mounts:?}");
    }
}

/// Set in the copy of this test binary that runs with a secret in its environment.
const SECRET_CHILD: &str = "PRGATE_TEST_CONTAINER_SECRET_CHILD";
const SECRET_VALUE: &str = "prgate-test-secret-7f3a9c";

#[test]
fn a_secret_in_the_runners_environment_never_reaches_a_container() {
    if std::env::var_os(SECRET_CHILD).is_some() {
        for_each_engine(secret_stays_out);
        return;
    }
    let output = Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "a_secret_in_the_runners_environment_never_reaches_a_container",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(SECRET_CHILD, "1")
        .env("PRGATE_SECRET_HF_TOKEN", SECRET_VALUE)
        .env("HF_TOKEN", SECRET_VALUE)
        .stdin(Stdio::null())
        .output()
        .expect("the copy runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the copy failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "the copy ran the test:\n{stdout}");
    assert!(stderr.contains("engine: the stand-in"), "{stderr}");
}

/// The copy's side: the secret is in this process's environment, as `PRGATE_SECRET_HF_TOKEN`
/// and, carelessly, as `HF_TOKEN`.
fn secret_stays_out(harness: &Harness) {
    let site = Site::new();
    let node = harness.node(&site);
    let run = run_id("secret");

    let refusals = [
        ContainerEnv::new(&node).set("HF_TOKEN", "anything").err(),
        ContainerEnv::new(&node).set("PRGATE_SECRET_HF_TOKEN", "anything").err(),
        ContainerEnv::new(&node).set("AUTH", &format!("Bearer {SECRET_VALUE}")).err(),
        ContainerEnv::new(&node).allow_secret("OTHER_TOKEN").err(),
    ];
    for refusal in &refusals {
        let message = refusal.as_ref().expect("refused").to_string();
        assert!(!message.contains(SECRET_VALUE), "an error shows the secret: {message}");
    }

    let mut step = Step::probe(&node);
    step.env = ContainerEnv::new(&node).set("A", "1").expect("a plain variable");
    let plain = launch(harness, &site, &node, &run, &step);
    assert!(plain.spec.env.get("HF_TOKEN").is_none(), "the client does not get it either");
    assert!(plain.spec.env.get("PRGATE_SECRET_HF_TOKEN").is_none());
    assert_eq!(run_to_end(harness, &site, &plain), 0, "{}", site.logs());
    let env = site.probe()["env"].as_object().expect("the environment").clone();
    assert_eq!(env["A"], "1");
    assert!(!env.contains_key("HF_TOKEN") && !env.contains_key("PRGATE_SECRET_HF_TOKEN"));
    assert!(
        env.values().all(|value| !value.as_str().unwrap_or_default().contains(SECRET_VALUE)),
        "the secret's value reached the container: {env:?}"
    );

    // A benchmark that needs the secret lets it in by name: the value rides in the client's
    // environment, never on its command line.
    step.purpose = "gated-benchmark";
    step.env = ContainerEnv::new(&node).allow_secret("HF_TOKEN").expect("the node has it");
    let gated = launch(harness, &site, &node, &run, &step);
    let args = argv(&gated);
    assert!(values(&args, "-e").contains(&"HF_TOKEN"), "{args:?}");
    assert!(args.iter().all(|arg| !arg.contains(SECRET_VALUE)), "the value is on the command line");
    assert_eq!(gated.spec.env.get("HF_TOKEN").and_then(|v| v.to_str()), Some(SECRET_VALUE));
    assert_eq!(run_to_end(harness, &site, &gated), 0, "{}", site.logs());
    assert_eq!(site.probe()["env"]["HF_TOKEN"], SECRET_VALUE);

    for call in harness.invocations() {
        let text = call["argv"].to_string();
        assert!(!text.contains(SECRET_VALUE), "the engine saw the value in {text}");
        let client_env = call["client_env"].as_array().expect("names");
        assert!(!client_env.contains(&Value::from("PRGATE_SECRET_HF_TOKEN")), "{client_env:?}");
    }
}
