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

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use prgate_runner::container::{
    Container, ContainerEnv, ContainerError, ContainerNetwork, ContainerRequest, DEFAULT_SHM_GIB,
    Engine, EngineKind, GatewayCheck, Launch, RunId, image_reference, run_network_name,
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

impl Step<'_> {
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
        // The network options allowed: none at all, the run's internal network, or a
        // container of the run's namespace.
        let network = run_network_name(run);
        let joined = format!("container:prgate-{run}-");
        let allowed_value =
            |value: &str| value == "none" || value == network || value.starts_with(&joined);
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

#[test]
fn the_command_runs_in_the_tree_with_only_the_given_environment() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("env");
        let mut step = Step::probe(&node);
        step.env = ContainerEnv::new(&node)
            .set("PRGATE_SERVER_URL", "http://127.0.0.1:30000")
            .and_then(|env| env.set("CHECKPOINT", "/models/org/ckpt"))
            .expect("plain variables");
        let launch = launch(harness, &site, &node, &run, &step);
        assert_isolated(&argv(&launch), &node, &run, &step.command);
        assert_eq!(run_to_end(harness, &site, &launch), 0, "{}", site.logs());

        let probe = site.probe();
        let cwd =
            if harness.real() { "/work/tree".to_owned() } else { site.tree.display().to_string() };
        assert_eq!(probe["cwd"], cwd.as_str());
        assert_eq!(probe["checkpoint"], "{\"layers\": 2}");
        let env = probe["env"].as_object().expect("the environment");
        assert_eq!(env["PRGATE_SERVER_URL"], "http://127.0.0.1:30000");
        assert_eq!(env["HF_HUB_OFFLINE"], "1");
        assert_eq!(env["TRANSFORMERS_OFFLINE"], "1");
        assert!(env["CHECKPOINT"].as_str().is_some_and(
            |path| path.ends_with("/models/org/ckpt") || path.ends_with("/store/org/ckpt")
        ));
        assert!(!env.contains_key("HIP_VISIBLE_DEVICES"), "no GPU, no GPU variable");
        let mut allowed = harness.baseline_variables();
        // Python sets LC_CTYPE itself when no locale is set (PEP 538).
        allowed.extend(strings(&[
            "PRGATE_SERVER_URL",
            "CHECKPOINT",
            "HF_HUB_OFFLINE",
            "TRANSFORMERS_OFFLINE",
            "LC_CTYPE",
        ]));
        for name in env.keys() {
            assert!(allowed.contains(name), "{name} reached the container");
        }

        if !harness.real() {
            let recorded = harness.invocations();
            let run_call = recorded.iter().find(|call| call["argv"][0] == "run").expect("a run");
            let recorded: Vec<String> = run_call["argv"]
                .as_array()
                .expect("argv")
                .iter()
                .map(|arg| arg.as_str().expect("text").to_owned())
                .collect();
            assert_eq!(recorded, argv(&launch)[1..], "the engine got the launch's arguments");
        }
    });
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

#[test]
fn the_checkpoint_store_is_mounted_read_only() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("readonly");
        let step = Step::probe(&node);
        let launch = launch(harness, &site, &node, &run, &step);
        assert_eq!(run_to_end(harness, &site, &launch), 0, "{}", site.logs());
        let probe = site.probe();
        assert_eq!(probe["checkpoint"], "{\"layers\": 2}", "the checkpoint is readable");
        if harness.real() {
            const EROFS: i64 = 30;
            assert_eq!(probe["models_write"], EROFS, "the store refused the write");
            assert!(!site.store.join("written-by-a-container").exists());
        } else {
            let mounts = parsed_run(harness)["mounts"].as_array().expect("mounts").clone();
            let by_destination = |dst: &str| {
                mounts.iter().find(|mount| mount["dst"] == dst).expect("the mount").clone()
            };
            assert_eq!(by_destination("/models")["readonly"], true);
            assert_eq!(by_destination("/models")["src"], site.store.display().to_string());
            assert_eq!(by_destination("/work/tree")["readonly"], false);
            assert_eq!(by_destination("/work/out")["readonly"], false);
        }
        assert!(site.out.join("probe.json").exists(), "the output directory is writable");
    });
}

/// What the stand-in understood of the last `run` it was given.
fn parsed_run(harness: &Harness) -> Value {
    let dir = harness.stand_in.as_ref().expect("the stand-in");
    let log = std::fs::read_to_string(dir.join("log.jsonl")).expect("the log");
    let last = log.lines().rev().find(|line| line.starts_with("{\"parsed\"")).expect("a run");
    serde_json::from_str::<Value>(last).expect("JSON")["parsed"].clone()
}

#[test]
fn a_container_gets_only_the_gpus_it_asks_for() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("gpus");
        let chosen = node.gpus().last().expect("the node has GPUs").clone();
        let ids = [chosen.id];
        let mut step = Step::probe(&node);
        step.gpus = &ids;
        let launch = launch(harness, &site, &node, &run, &step);
        let args = argv(&launch);
        assert_isolated(&args, &node, &run, &step.command);
        let device = chosen.render_device.display().to_string();
        assert_eq!(values(&args, "--device"), ["/dev/kfd", device.as_str()]);
        assert_eq!(values(&args, "--group-add"), ["video"]);
        assert!(values(&args, "-e").contains(&"HIP_VISIBLE_DEVICES=0"), "{args:?}");
        let gpus_label = format!("prgate.gpus={}", chosen.id);
        assert!(values(&args, "--label").contains(&gpus_label.as_str()), "{args:?}");
        for other in node.gpus().iter().filter(|gpu| gpu.id != chosen.id) {
            let other = other.render_device.display().to_string();
            assert!(!args.iter().any(|arg| arg.contains(&other)), "{other} is not given");
        }
        assert!(!args.iter().any(|arg| arg == "/dev/dri"), "never the whole of /dev/dri");

        if harness.gpus_usable {
            assert_eq!(run_to_end(harness, &site, &launch), 0, "{}", site.logs());
            assert_eq!(site.probe()["env"]["HIP_VISIBLE_DEVICES"], "0");
            if !harness.real() {
                let parsed = parsed_run(harness);
                assert_eq!(parsed["devices"], serde_json::json!(["/dev/kfd", device]));
                assert_eq!(parsed["groups"], serde_json::json!(["video"]));
            }
        }
    });
}

/// A port that is free on this host now.
fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a free port");
    listener.local_addr().expect("its address").port()
}

fn http_get(address: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream =
        TcpStream::connect_timeout(&address, Duration::from_secs(10)).expect("it connects");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("a timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").expect("the request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("the answer");
    answer
}

/// What the probe of [`a_server_is_reached_on_the_runs_network_and_reaches_nothing_else`]
/// tries from the server's network namespace: every `host:port` of its arguments, then a name
/// lookup. Writes `{"host:port": "connected" | the error}` to `<out>/reach.json`.
const REACH: &str = r#"import json, socket, sys
result = {}
for target in sys.argv[2:]:
    host, port = target.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.settimeout(3)
    try:
        sock.connect((host, int(port)))
        result[target] = "connected"
    except OSError as error:
        result[target] = repr(error)
    finally:
        sock.close()
try:
    socket.setdefaulttimeout(3)
    result["dns:example.com"] = "resolved %s" % socket.gethostbyname("example.com")
except OSError as error:
    result["dns:example.com"] = repr(error)
with open(sys.argv[1], "w") as file:
    json.dump(result, file)
"#;

/// The host's IPv4 addresses other than loopback (`ip -o -4 addr show`): what a container
/// could try to reach the node's services at.
fn host_addresses() -> Vec<String> {
    let output = Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
        .expect("`ip` (iproute2) lists the host's addresses");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.iter().position(|word| *word == "inet")?;
            words.get(at + 1)?.split('/').next().map(str::to_owned)
        })
        .filter(|address| !address.starts_with("127."))
        .collect()
}

/// The run network's gateway: the host's own address on it.
fn gateway(harness: &Harness, network: &str) -> String {
    let format = match harness.engine.kind() {
        EngineKind::Podman => "{{range .Subnets}}{{.Gateway}}{{end}}",
        EngineKind::Docker => "{{range .IPAM.Config}}{{.Gateway}}{{end}}",
    };
    let output = harness.client(&["network", "inspect", "--format", format, network]);
    assert!(output.status.success(), "network inspect {network}: {output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Removes a run's containers and networks when dropped.
struct RunCleanup<'a> {
    engine: &'a Engine,
    run: &'a RunId,
}

impl Drop for RunCleanup<'_> {
    fn drop(&mut self) {
        let _containers = self.engine.remove_run(self.run);
        let _networks = self.engine.remove_run_networks(self.run);
    }
}

#[test]
fn a_server_is_reached_on_the_runs_network_and_reaches_nothing_else() {
    for_each_engine(|harness| {
        let site = Site::new();
        std::fs::write(site.tree.join("reach.py"), REACH).expect("the reach probe");
        let node = harness.node(&site);
        let run = run_id("network");
        // Removed however the test ends, so that a failed assertion leaves no network behind
        // for `.ci/e2e-container`'s check.
        let _cleanup = RunCleanup { engine: &harness.engine, run: &run };
        let network = harness.engine.create_run_network(&run).expect("the run's network");
        assert_eq!(network, run_network_name(&run));
        assert_eq!(harness.engine.create_run_network(&run).expect("taken as it is"), network);

        // The stand-in runs the server on the host, so its container port must be free here;
        // in a real container it listens on every interface of its own namespace.
        let (port, bind) =
            if harness.real() { (8000, "0.0.0.0") } else { (free_port(), "127.0.0.1") };
        let port_text = port.to_string();
        let step = Step {
            purpose: "pr-server",
            gpus: &[],
            network: ContainerNetwork::Run,
            env: ContainerEnv::new(&node),
            command: strings(&["python3", "-m", "http.server", &port_text, "--bind", bind]),
        };
        let server_launch = launch(harness, &site, &node, &run, &step);
        let args = argv(&server_launch);
        assert_isolated(&args, &node, &run, &step.command);
        assert_eq!(values(&args, "--network"), [network.as_str()]);

        // The host (prgate's health check and clients) reaches it at its address there.
        let mut container = Container::start(&harness.engine, &server_launch).expect("it starts");
        let address =
            container.wait_address(&run, Duration::from_secs(60)).expect("an address on it");
        assert!(!address.is_unspecified(), "{address}");
        let url = format!("http://{address}:{port}/hello.txt");
        wait_healthy(&url, Duration::from_secs(60), container.client()).expect("the server is up");
        let answer = http_get(std::net::SocketAddr::new(address, port), "/hello.txt");
        assert!(answer.contains("hello from the tree"), "{answer}");

        // A client in the server's namespace reaches it on its loopback.
        let fetch = format!(
            "import sys, urllib.request; open(sys.argv[1], 'wb').write(urllib.request.urlopen('http://127.0.0.1:{port}/hello.txt', timeout=30).read())"
        );
        let client = Step {
            purpose: "pr-serving-tests",
            gpus: &[],
            network: ContainerNetwork::JoinedTo(container.name()),
            env: ContainerEnv::new(&node),
            command: strings(&["python3", "-c", &fetch, "/work/out/client.txt"]),
        };
        let client_launch = launch(harness, &site, &node, &run, &client);
        assert_isolated(&argv(&client_launch), &node, &run, &client.command);
        assert_eq!(run_to_end(harness, &site, &client_launch), 0, "{}", site.logs());
        let fetched = std::fs::read_to_string(site.out.join("client.txt")).expect("it fetched");
        assert_eq!(fetched, "hello from the tree");

        if harness.real() {
            // From the server's namespace: no node service on the host's loopback, on any of
            // the host's addresses (its address on the run's network, the gateway, among
            // them), nor an outside address, nor a name lookup.
            let loopback = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a host service");
            let wildcard = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("a host service");
            let any_port = wildcard.local_addr().expect("its address").port();
            let gateway = gateway(harness, &network);
            let mut targets = vec![
                format!("127.0.0.1:{}", loopback.local_addr().expect("its address").port()),
                format!("{gateway}:{any_port}"),
                "1.1.1.1:80".to_owned(),
                "8.8.8.8:53".to_owned(),
            ];
            targets.extend(host_addresses().into_iter().map(|host| format!("{host}:{any_port}")));
            let mut command = strings(&["python3", "reach.py", "/work/out/reach.json"]);
            command.extend(targets.iter().cloned());
            let probe = Step {
                purpose: "pr-reach",
                gpus: &[],
                network: ContainerNetwork::JoinedTo(container.name()),
                env: ContainerEnv::new(&node),
                command,
            };
            let probe_launch = launch(harness, &site, &node, &run, &probe);
            assert_eq!(run_to_end(harness, &site, &probe_launch), 0, "{}", site.logs());
            let reach: Value = serde_json::from_str(
                &std::fs::read_to_string(site.out.join("reach.json")).expect("the probe wrote"),
            )
            .expect("its JSON");
            let reached: Vec<String> = reach
                .as_object()
                .expect("an object")
                .iter()
                .filter(|(_, outcome)| {
                    outcome
                        .as_str()
                        .is_some_and(|text| text == "connected" || text.starts_with("resolved"))
                })
                .map(|(target, _)| target.clone())
                .collect();
            assert!(
                reached.is_empty(),
                "the server's namespace reached {reached:?} (all of it: {reach})\nhint: the \
                 host's address on the run's network answers unless the node's firewall drops \
                 new connections from it (docs/container.md, \"Network\"; .ci/engine-up)"
            );
            for listener in [&loopback, &wildcard] {
                listener.set_nonblocking(true).expect("non-blocking");
                assert!(listener.accept().is_err(), "a host service was reached");
            }
        }

        let name = container.name().to_owned();
        container.stop().expect("it stops");
        assert!(!harness.exists(&name), "the container is gone");
        assert_eq!(harness.engine.remove_run_networks(&run).expect("removed"), vec![network]);
        assert!(harness.engine.remove_run_networks(&run).expect("again").is_empty());
    });
}

/// While it lives, the node's firewall lets new connections from podman's bridges to one port
/// of the host through (`iptables -I INPUT -i podman+ -p tcp --dport PORT -j ACCEPT`, ahead
/// of `.ci/engine-up`'s DROP). Only that port: the one a listener of the test holds, so that
/// tests running at the same time (which check that nothing else answers) see no change.
struct FirewallHole {
    rule: Vec<String>,
}

impl FirewallHole {
    fn open(port: u16) -> FirewallHole {
        let rule = strings(&[
            "INPUT",
            "-i",
            "podman+",
            "-p",
            "tcp",
            "--dport",
            &port.to_string(),
            "-j",
            "ACCEPT",
        ]);
        let status =
            Command::new("iptables").arg("-I").args(&rule).status().expect("iptables runs");
        assert!(status.success(), "iptables -I {rule:?}: {status}");
        FirewallHole { rule }
    }
}

impl Drop for FirewallHole {
    fn drop(&mut self) {
        let _status = Command::new("iptables").arg("-D").args(&self.rule).status();
    }
}

#[test]
fn the_gateway_check_finds_the_host_closed_and_a_host_that_answers_open() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("gateway");
        let _cleanup = RunCleanup { engine: &harness.engine, run: &run };
        let network = harness.engine.create_run_network(&run).expect("the run's network");
        let env = ContainerEnv::new(&node);
        let log = site.log("gateway-probe");
        let request = ContainerRequest {
            node: &node,
            run: &run,
            purpose: "gateway-probe",
            labels: &[],
            gpus: &[],
            tree: &site.tree,
            out: &site.out,
            env: &env,
            network: ContainerNetwork::Run,
            datasets: None,
            shm_gib: DEFAULT_SHM_GIB,
            command: &[],
            log: &log,
            grace: Duration::from_secs(2),
        };
        let gateway = harness.engine.network_gateway(&network).expect("the network's gateway");
        if harness.real() {
            assert_eq!(gateway.to_string(), self::gateway(harness, &network));
        }

        // What was at the probe's log (here a link to a host file) is removed, not followed.
        let host_file = site.root().join("host-file");
        std::fs::write(&host_file, "prgate-probe:connected\n").expect("a host file");
        std::fs::create_dir_all(log.parent().expect("a folder")).expect("the logs' folder");
        std::os::unix::fs::symlink(&host_file, &log).expect("a link");

        // The node's firewall drops new connections from the run's network to the host
        // (.ci/engine-up's rule on podman; the stand-in's default): the probe times out on
        // podman, and is refused on the stand-in (its commands run on the host).
        match harness.engine.check_gateway(&request).expect("the check tells") {
            GatewayCheck::Closed { gateway: probed, answer, .. } => {
                assert_eq!(probed, gateway);
                let expected =
                    if harness.real() { "no answer within 3s" } else { "Connection refused" };
                assert_eq!(answer, expected, "{}", site.logs());
            }
            open => panic!("{open}\n{}", site.logs()),
        }
        let untouched = std::fs::read_to_string(&host_file).expect("the host file");
        assert_eq!(untouched, "prgate-probe:connected\n");
        assert!(!log.is_symlink(), "the probe's log is its own file");

        // The host answers at one port of the gateway: on podman, a rule that lets that port
        // through (not the DROP rule removed: other tests run meanwhile); on the stand-in, its
        // `gateway-open` switch.
        let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("a host service");
        let port = listener.local_addr().expect("its address").port();
        let _hole = match &harness.stand_in {
            None => Some(FirewallHole::open(port)),
            Some(state) => {
                std::fs::write(state.join("gateway-open"), "").expect("the switch");
                None
            }
        };
        match harness.engine.probe_gateway(&request, gateway, listener).expect("the check tells") {
            GatewayCheck::Open { gateway: probed, port: at, how } => {
                assert_eq!((probed, at), (gateway, port));
                assert!(how.contains("accepted a connection from"), "{how}");
            }
            closed => panic!("{closed}\n{}", site.logs()),
        }
        // The probes' containers are gone.
        let name = prgate_runner::container::container_name(&run, "gateway-probe").expect("a name");
        assert!(!harness.exists(&name), "a probe is left");
    });
}

#[test]
fn a_timed_out_container_is_stopped_and_removed() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("timeout");
        let step = Step {
            purpose: "slow-tests",
            gpus: &[],
            network: ContainerNetwork::None,
            env: ContainerEnv::new(&node),
            command: strings(&[
                "python3",
                "-c",
                "import time; print('sleeping', flush=True); time.sleep(600)",
            ]),
        };
        let launch = launch(harness, &site, &node, &run, &step);
        let mut container = Container::start(&harness.engine, &launch).expect("it starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !site.logs().contains("sleeping") {
            assert!(Instant::now() < deadline, "it never started: {}", site.logs());
            std::thread::sleep(Duration::from_millis(20));
        }
        let pid = (!harness.real()).then(|| {
            let state = harness.state();
            state["containers"][0]["pid"].as_u64().expect("the command's pid")
        });
        let started = Instant::now();
        let finished = container.wait_with_timeout(Duration::from_secs(1)).expect("it ends");
        assert!(matches!(finished, Finished::TimedOut(_)), "{finished:?}");
        assert!(started.elapsed() < Duration::from_secs(40), "stopped within the grace period");
        assert!(!harness.exists(container.name()), "the container is gone");
        if let Some(pid) = pid {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            assert!(stat.is_empty() || stat.contains(") Z"), "the command still runs: {stat}");
        }
        assert!(harness.engine.remove_run(&run).expect("the cleanup").is_empty());
    });
}

#[test]
fn cleanup_removes_the_runs_containers_and_no_one_elses() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("cleanup");
        let other = run_id("other");
        let image = image_reference(node.image());
        let create = |name: &str, label: Option<String>| {
            let mut args = vec!["create", "--name", name];
            if let Some(label) = &label {
                args.extend(["--label", label]);
            }
            args.extend([image.as_str(), "python3", "-c", "pass"]);
            let output = harness.client(&args);
            assert!(output.status.success(), "create {name}: {output:?}");
        };
        let foreign = format!("prgate-{other}-server");
        let unlabelled = format!("someone-elses-{run}");
        let leftover = format!("prgate-{run}-leftover");
        create(&foreign, Some(format!("prgate.run={other}")));
        create(&unlabelled, None);
        create(&leftover, Some(format!("prgate.run={run}")));

        let step = Step {
            purpose: "server",
            gpus: &[],
            network: ContainerNetwork::None,
            env: ContainerEnv::new(&node),
            command: strings(&["python3", "-c", "import time; time.sleep(600)"]),
        };
        let launch = launch(harness, &site, &node, &run, &step);
        let mut running = Container::start(&harness.engine, &launch).expect("it starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !harness.exists(running.name()) {
            assert!(Instant::now() < deadline, "it never started: {}", site.logs());
            std::thread::sleep(Duration::from_millis(20));
        }

        let removed = harness.engine.remove_run(&run).expect("the cleanup");
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert!(!harness.exists(&leftover), "our leftover is removed");
        assert!(!harness.exists(running.name()), "our running container is removed");
        assert!(harness.exists(&foreign), "another run's container stays");
        assert!(harness.exists(&unlabelled), "an unlabelled container stays");
        let finished = running.wait_with_timeout(Duration::from_secs(60)).expect("it ends");
        assert!(matches!(finished, Finished::Exited(_)), "{finished:?}");
        assert!(harness.engine.remove_run(&run).expect("again").is_empty());

        let output = harness.client(&["rm", "-f", &foreign, &unlabelled]);
        assert!(output.status.success(), "{output:?}");

        // Networks likewise: the run's go, another run's stays.
        let ours = harness.engine.create_run_network(&run).expect("ours");
        let theirs = harness.engine.create_run_network(&other).expect("theirs");
        assert_eq!(harness.engine.remove_run_networks(&run).expect("removed"), vec![ours]);
        assert_eq!(harness.engine.remove_run_networks(&other).expect("removed"), vec![theirs]);
        assert!(harness.engine.remove_run_networks(&run).expect("again").is_empty());
    });
}

#[test]
fn the_image_is_checked_against_its_pinned_digest() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let info = harness.engine.check_image(node.image()).expect("the image is here");
        assert!(info.id.starts_with("sha256:") && info.id.len() == 71, "{info:?}");
        if let Some(digest) = &harness.digest {
            assert!(info.has_digest(digest), "{info:?}");
        }
        if !harness.real() {
            assert_eq!(info.id, STAND_IN_ID);
        }
        let mut wrong = node.image().clone();
        wrong.digest = Some(format!("sha256:{}", "9".repeat(64)));
        let error = harness.engine.check_image(&wrong).expect_err("another digest is refused");
        assert!(
            matches!(error, ContainerError::DigestMismatch { .. } | ContainerError::Failed { .. }),
            "{error}"
        );

        let error = harness.engine.image_info("prgate-test/no-such-image:0").expect_err("missing");
        let message = error.to_string();
        assert!(message.contains(&harness.engine.program().display().to_string()), "{message}");
        assert!(message.contains("image inspect"), "{message}");
        let said = message.to_lowercase();
        assert!(said.contains("no such image") || said.contains("image not known"), "{message}");
    });
}

#[test]
fn engine_errors_name_the_engine_the_command_and_what_it_said() {
    for_each_engine(|harness| {
        let name = "prgate-no-such-container-here";
        let error = harness.engine.stop(name, Duration::from_millis(1500)).expect_err("no such");
        assert!(error.is_no_such_container(), "{error}");
        let message = error.to_string();
        assert!(message.contains(&harness.engine.program().display().to_string()), "{message}");
        assert!(message.contains(&format!("stop --time 2 {name}")), "{message}");
        let error = harness.engine.address(name, "prgate-net").expect_err("no such container");
        assert!(error.to_string().contains("inspect --format"), "{error}");
        assert!(error.to_string().contains(name), "{error}");
    });
}

#[test]
fn the_clients_exit_status_is_the_commands() {
    for_each_engine(|harness| {
        let site = Site::new();
        let node = harness.node(&site);
        let run = run_id("status");
        let cases: [(&str, &[&str], i32); 3] = [
            ("passes", &["python3", "-c", "pass"], 0),
            ("fails", &["python3", "-c", "import sys; sys.exit(3)"], 3),
            ("missing", &["prgate-no-such-command"], 127),
        ];
        for (purpose, command, expected) in cases {
            let step = Step {
                purpose,
                gpus: &[],
                network: ContainerNetwork::None,
                env: ContainerEnv::new(&node),
                command: strings(command),
            };
            let launch = launch(harness, &site, &node, &run, &step);
            // Podman's default init (catatonit) exits 1 when the command is missing; tini,
            // docker's, exits 127: a podman node names tini in containers.conf (`init_path`).
            let hint = "hint: podman reports a missing command as 127 only with tini as its init \
                        (init_path in containers.conf, docs/container.md)";
            assert_eq!(
                run_to_end(harness, &site, &launch),
                expected,
                "{purpose}: {}\n{hint}",
                site.logs()
            );
        }
    });
}

/// The stand-in's own check: what prgate must never ask for, it refuses as an engine
/// refuses a bad flag (status 125), so a launcher that asked for it would fail every test.
#[test]
fn the_stand_in_refuses_what_prgate_must_never_ask_for() {
    let harness = stand_in();
    let site = Site::new();
    let node = harness.node(&site);
    let run = run_id("refusals");
    let launch = launch(&harness, &site, &node, &run, &Step::probe(&node));
    let good: Vec<String> = argv(&launch)[1..].to_vec();
    let bad: [&[&str]; 15] = [
        &["--privileged"],
        &["--network", "host"],
        &["--network", "bridge"],
        &["--ipc=host"],
        &["--cap-add", "SYS_ADMIN"],
        &["-p", "8000:8000"],
        &["-p", "0.0.0.0::8000"],
        &["--device", "/dev/sda"],
        &["--device", "/dev/dri"],
        &["-v", "/var/run/docker.sock:/var/run/docker.sock"],
        &["--env-file", "/etc/environment"],
        &["--mount", "type=volume,src=x,dst=/y"],
        &["--pull", "always"],
        &["--security-opt", "seccomp=unconfined"],
        &["--group-add", "docker"],
    ];
    for options in bad {
        let mut args: Vec<&str> = vec!["run"];
        args.extend(options);
        args.extend(good[1..].iter().map(String::as_str));
        let output = harness.client(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(125), "{options:?} was accepted: {stderr}");
        assert!(stderr.starts_with("fake-engine: "), "{stderr}");
    }
    let mut missing_image = good.clone();
    let image = missing_image.iter().position(|arg| arg.starts_with(STAND_IN_IMAGE)).expect("it");
    missing_image[image] = "prgate-test/other:1".to_owned();
    let output = harness.client(&missing_image.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(output.status.code(), Some(125), "a missing image is never pulled");

    let output = harness.client(&good.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(output.status.success(), "the launcher's own command line runs: {output:?}");
}
