//! Tests of the launcher's pure parts: the command line of a request, every refusal, names,
//! the engine's answers parsed. The engine itself is exercised in `runner/tests/container/`.

use std::path::Path;

use super::*;

/// A node with two GPUs, one secret and its checkpoint store in `store`.
fn node(store: &Path, digest: bool) -> NodeProfile {
    let digest = if digest {
        "digest = \"sha256:4f1c2a9e0b7d3c5a8e6f1b2d4c9a7e3f5b8d1c6a2e9f4b7d3c5a8e1f6b2d9c4a\""
    } else {
        ""
    };
    let text = format!(
        r#"name = "n1"
hardware = "mi355x"
checkpoint-store = "{}"
cache-dir = "/var/cache/prgate"
work-dir = "/var/lib/prgate"
secrets = ["HF_TOKEN"]
[gpus]
ids = [2, 3]
render-devices = ["/dev/dri/renderD144", "/dev/dri/renderD152"]
[image]
name = "lmsysorg/sglang:v0.5.5-rocm700-mi35x"
{digest}
[checkpoints]
"kimi-k3" = "moonshotai/Kimi-K3"
"#,
        store.display()
    );
    NodeProfile::parse(&text, "node.toml").expect("the test node parses")
}

/// A temporary directory with `store`, `tree` and `out` in it.
struct Dirs {
    root: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Dirs {
        let root = tempfile::tempdir().expect("a temporary directory");
        for dir in ["store", "tree", "out"] {
            std::fs::create_dir(root.path().join(dir)).expect("a directory");
        }
        Dirs { root }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name).canonicalize().expect("it exists")
    }
}

/// The parts of a request a case changes; the rest is fixed.
struct Case<'a> {
    gpus: &'a [u32],
    network: ContainerNetwork<'a>,
    labels: &'a [(&'a str, &'a str)],
    purpose: &'a str,
    tree: Option<&'a Path>,
    out: Option<&'a Path>,
    datasets: Option<&'a Path>,
    env: Option<ContainerEnv>,
    shm_gib: u32,
    command: &'a [&'a str],
    digest: bool,
}

impl Default for Case<'_> {
    fn default() -> Self {
        Case {
            gpus: &[],
            network: ContainerNetwork::None,
            labels: &[],
            purpose: "pr-tests",
            tree: None,
            out: None,
            datasets: None,
            env: None,
            shm_gib: DEFAULT_SHM_GIB,
            command: &["python3", "-m", "pytest"],
            digest: false,
        }
    }
}

/// Launches `case` with the engine `/usr/bin/docker` and directories of `dirs`, and renders
/// the argument list (one option per line, then the image and the command, the temporary
/// directory as `<tmp>`), or the error as users see it.
fn check(dirs: &Dirs, case: Case<'_>) -> String {
    let node = node(&dirs.path("store"), case.digest);
    let run = RunId::new("run-7").expect("a run id");
    let env = case.env.unwrap_or_else(|| ContainerEnv::new(&node));
    let tree = case.tree.map(Path::to_path_buf).unwrap_or_else(|| dirs.path("tree"));
    let out = case.out.map(Path::to_path_buf).unwrap_or_else(|| dirs.path("out"));
    let command: Vec<String> = case.command.iter().map(|arg| (*arg).to_owned()).collect();
    let log = dirs.path("out").join("client.log");
    let request = ContainerRequest {
        node: &node,
        run: &run,
        purpose: case.purpose,
        labels: case.labels,
        gpus: case.gpus,
        tree: &tree,
        out: &out,
        env: &env,
        network: case.network,
        datasets: case.datasets,
        shm_gib: case.shm_gib,
        command: &command,
        log: &log,
        grace: Duration::from_secs(5),
    };
    let tmp = dirs.root.path().canonicalize().expect("it exists").display().to_string();
    let launch = match Engine::at("/usr/bin/docker").launch(&request) {
        Ok(launch) => launch,
        Err(error) => return format!("error: {}", error.to_string().replace(&tmp, "<tmp>")),
    };
    let argv: Vec<String> = launch
        .spec
        .argv
        .iter()
        .map(|argument| argument.to_string_lossy().replace(&tmp, "<tmp>"))
        .collect();
    let (options, positional) = argv.split_at(argv.len() - command.len() - 1);
    let mut lines = vec![format!("name: {}", launch.name)];
    for argument in options {
        match lines.last_mut() {
            Some(line) if !argument.starts_with('-') && line.starts_with('-') => {
                line.push(' ');
                line.push_str(argument);
            }
            _ => lines.push(argument.clone()),
        }
    }
    lines.push(format!("image: {}", positional[0]));
    lines.push(format!("command: {:?}", &positional[1..]));
    lines.join("\n")
}

#[test]
fn a_server_on_two_gpus() {
    insta::assert_snapshot!(check(
        &Dirs::new(),
        Case {
            gpus: &[3, 2],
            network: ContainerNetwork::Side(NetworkSide::Pr),
            labels: &[("prgate.model", "kimi-k3"), ("prgate.side", "pr")],
            purpose: "pr-server",
            command: &["python3", "-m", "sglang.launch_server", "--port", "30000"],
            digest: true,
            ..Case::default()
        }
    ));
}

#[test]
fn a_step_without_gpus_gets_no_device() {
    let argv = check(&Dirs::new(), Case::default());
    assert!(!argv.contains("--device"), "{argv}");
    assert!(!argv.contains("--group-add"), "{argv}");
    assert!(!argv.contains("HIP_VISIBLE_DEVICES"), "{argv}");
    let end =
        "image: lmsysorg/sglang:v0.5.5-rocm700-mi35x\ncommand: [\"python3\", \"-m\", \"pytest\"]";
    assert!(argv.ends_with(end), "{argv}");
}

#[test]
fn a_container_gets_no_network_its_sides_internal_one_or_a_servers_namespace() {
    let dirs = Dirs::new();
    let network = |network| {
        let argv = check(&dirs, Case { network, ..Case::default() });
        let lines: Vec<&str> = argv.lines().filter(|line| line.starts_with("--network")).collect();
        assert!(!argv.contains("\n-p ") && !argv.contains("--publish"), "{argv}");
        lines.join("\n")
    };
    assert_eq!(network(ContainerNetwork::None), "--network none");
    // Each side of the run has an internal network of its own.
    assert_eq!(network(ContainerNetwork::Side(NetworkSide::Base)), "--network prgate-run-7-base");
    assert_eq!(network(ContainerNetwork::Side(NetworkSide::Pr)), "--network prgate-run-7-pr");
    assert_eq!(
        network(ContainerNetwork::JoinedTo("prgate-run-7-pr-server")),
        "--network container:prgate-run-7-pr-server"
    );
    // Only a container of this run is joined: not another run's, not the host's.
    for foreign in ["prgate-run-8-pr-server", "prgate-run-7-", "host", "prgate-run-7-a b"] {
        let refused =
            check(&dirs, Case { network: ContainerNetwork::JoinedTo(foreign), ..Case::default() });
        assert!(refused.contains("is not the name of a container of this run"), "{refused}");
    }
    let run = RunId::new("run-7").expect("a run id");
    assert_eq!(side_network_name(&run, NetworkSide::Base), "prgate-run-7-base");
    assert_eq!(side_network_name(&run, NetworkSide::Pr), "prgate-run-7-pr");
}

#[test]
fn the_dataset_cache_is_mounted_read_only_with_the_hub_offline() {
    let dirs = Dirs::new();
    std::fs::create_dir(dirs.root.path().join("datasets")).expect("a folder");
    let datasets = dirs.path("datasets");
    let argv = check(&dirs, Case { datasets: Some(&datasets), ..Case::default() });
    assert!(
        argv.contains("\n--mount type=bind,src=<tmp>/datasets,dst=/datasets,readonly\n"),
        "{argv}"
    );
    assert!(argv.contains("\n-e HF_DATASETS_OFFLINE=1\n-e HF_HUB_CACHE=/datasets/hub\n"), "{argv}");
    // It may not overlap a writable mount.
    let inside = dirs.path("out").join("datasets");
    std::fs::create_dir_all(&inside).expect("a folder");
    let refused = check(&dirs, Case { datasets: Some(&inside), ..Case::default() });
    assert!(refused.starts_with("error: "), "{refused}");
    assert!(refused.contains("the dataset cache"), "{refused}");
}

#[test]
fn variables_and_a_secret_by_name() {
    let dirs = Dirs::new();
    let node = node(&dirs.path("store"), false);
    let env = ContainerEnv::new(&node)
        .set("PYTHONDONTWRITEBYTECODE", "1")
        .and_then(|env| env.set("PRGATE_SERVER_URL", "http://127.0.0.1:30000"))
        .expect("plain variables are accepted");
    let argv = check(&dirs, Case { env: Some(env), ..Case::default() });
    assert!(argv.contains("-e PRGATE_SERVER_URL=http://127.0.0.1:30000\n"), "{argv}");
    assert!(argv.contains("-e PYTHONDONTWRITEBYTECODE=1\n"), "{argv}");
}

#[test]
fn every_kind_of_refused_request() {
    let dirs = Dirs::new();
    let link = dirs.root.path().join("link-to-etc");
    std::os::unix::fs::symlink("/etc", &link).expect("a link");
    let inside_tree = dirs.path("tree").join("out");
    std::fs::create_dir(&inside_tree).expect("a directory");
    let cases: Vec<(&str, Case<'_>)> = vec![
        ("a GPU the node lacks", Case { gpus: &[0], ..Case::default() }),
        ("a GPU twice", Case { gpus: &[2, 2], ..Case::default() }),
        ("no shared memory", Case { shm_gib: 0, ..Case::default() }),
        ("an empty command", Case { command: &[], ..Case::default() }),
        ("a NUL in the command", Case { command: &["echo", "a\0b"], ..Case::default() }),
        ("an empty purpose", Case { purpose: "", ..Case::default() }),
        ("a label outside prgate.", Case { labels: &[("model", "x")], ..Case::default() }),
        ("the launcher's label", Case { labels: &[("prgate.run", "x")], ..Case::default() }),
        ("a label with a newline", Case { labels: &[("prgate.side", "a\nb")], ..Case::default() }),
        ("the root as tree", Case { tree: Some(Path::new("/")), ..Case::default() }),
        ("/etc as tree", Case { tree: Some(Path::new("/etc")), ..Case::default() }),
        ("/var holds /var/run", Case { tree: Some(Path::new("/var")), ..Case::default() }),
        ("a link to /etc", Case { tree: Some(&link), ..Case::default() }),
        ("a relative tree", Case { tree: Some(Path::new("tree")), ..Case::default() }),
        ("a missing out", Case { out: Some(Path::new("/nonexistent/out")), ..Case::default() }),
        ("out inside the tree", Case { out: Some(&inside_tree), ..Case::default() }),
    ];
    let rendered: Vec<String> =
        cases.into_iter().map(|(what, case)| format!("{what}:\n{}", check(&dirs, case))).collect();
    let rendered = rendered.join("\n\n").replace(&dirs.root.path().display().to_string(), "<tmp>");
    insta::assert_snapshot!(rendered);
}

#[test]
fn the_home_directory_is_never_mounted() {
    let home = PathBuf::from(std::env::var_os("HOME").expect("the tests run with a HOME"));
    let argv = check(&Dirs::new(), Case { tree: Some(&home), ..Case::default() });
    assert!(argv.starts_with("error: the tree"), "{argv}");
    assert!(argv.contains("never mounted"), "{argv}");
}

#[test]
fn the_store_may_not_overlap_a_writable_mount() {
    let dirs = Dirs::new();
    let store = dirs.path("store");
    let argv = check(&dirs, Case { tree: Some(&store), ..Case::default() });
    assert!(
        argv.starts_with("error: the checkpoint store ")
            && argv.ends_with(" overlap: each is mounted on its own"),
        "{argv}"
    );
}

#[test]
fn the_environment_refuses_secrets_and_reserved_names() {
    let dirs = Dirs::new();
    let node = node(&dirs.path("store"), false);
    let refused = |name: &str, value: &str| match ContainerEnv::new(&node).set(name, value) {
        Ok(_) => "accepted".to_owned(),
        Err(error) => error.to_string(),
    };
    let rendered = [
        ("HF_TOKEN", "x"),
        ("PRGATE_SECRET_HF_TOKEN", "x"),
        ("PRGATE_SECRET_OTHER", "x"),
        ("HF_HUB_OFFLINE", "0"),
        ("HIP_VISIBLE_DEVICES", "0,1,2"),
        ("1ABC", "x"),
        ("A-B", "x"),
        ("", "x"),
        ("A", "a\0b"),
        ("PLAIN", "fine"),
    ]
    .map(|(name, value)| format!("{name}={value:?}: {}", refused(name, value)))
    .join("\n");
    insta::assert_snapshot!(rendered);

    let unknown = ContainerEnv::new(&node).allow_secret("OTHER_TOKEN");
    assert_eq!(
        unknown.map(|_| ()).map_err(|error| error.to_string()),
        Err("node n1 has no secret OTHER_TOKEN".to_owned())
    );
}

#[test]
fn names_are_sanitised() {
    let run = RunId::new("r1").expect("a run id");
    let cases = [
        ("pr-server", "prgate-r1-pr-server"),
        ("base server/kimi k3", "prgate-r1-base-server-kimi-k3"),
        ("unit_tests.v2", "prgate-r1-unit_tests.v2"),
        ("é$x", "prgate-r1---x"),
    ];
    for (purpose, expected) in cases {
        assert_eq!(container_name(&run, purpose).expect("a name"), expected);
    }
    assert_eq!(
        container_name(&run, &"x".repeat(100)).expect("a name").len(),
        "prgate-r1-".len() + 64
    );
    for bad in ["", "-r", "a b", "a/b", "a=b", &"r".repeat(65)] {
        assert!(RunId::new(bad).is_err(), "{bad:?} is refused");
    }
    for good in ["r", "pr-123.base_7", &"r".repeat(64)] {
        assert_eq!(RunId::new(good).expect("accepted").as_str(), good);
    }
}

#[test]
fn image_inspect_answers() {
    let id = "a".repeat(64);
    let docker = format!("sha256:{id} lmsysorg/sglang@sha256:{}\n", "b".repeat(64));
    let info = parse_image_info(&docker).expect("docker's answer");
    assert_eq!(info.id, format!("sha256:{id}"));
    assert!(info.has_digest(&format!("sha256:{}", "b".repeat(64))));
    assert!(!info.has_digest(&format!("sha256:{}", "c".repeat(64))));

    let podman = format!("{} \n", id.to_uppercase());
    let info = parse_image_info(&podman).expect("podman's answer, with no repo digest");
    assert_eq!(info, ImageInfo { id: format!("sha256:{id}"), repo_digests: vec![] });

    for bad in ["", "sha256:abc", &format!("sha256:{id} not-a-digest")] {
        assert_eq!(parse_image_info(bad), None, "{bad:?}");
    }
    let image = Image { name: "img:1".to_owned(), digest: Some("sha256:d".to_owned()) };
    assert_eq!(image_reference(&image), "img:1@sha256:d");
    assert_eq!(image_reference(&Image { digest: None, ..image }), "img:1");
}

#[test]
fn an_engine_is_found_on_the_path() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let only_podman = dir.path().join("a");
    let both = dir.path().join("b");
    for (folder, names) in [(&only_podman, &["podman"][..]), (&both, &["podman", "docker"][..])] {
        std::fs::create_dir(folder).expect("a directory");
        for name in names {
            let program = folder.join(name);
            std::fs::write(&program, "#!/bin/sh\n").expect("a program");
            std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))
                .expect("executable");
        }
    }
    std::fs::write(dir.path().join("docker"), "not executable").expect("a file");

    let path = std::env::join_paths([dir.path(), &only_podman]).expect("a PATH");
    let engine = Engine::detect(Some(&path)).expect("podman is found");
    assert_eq!(
        (engine.kind(), engine.program()),
        (EngineKind::Podman, &*only_podman.join("podman"))
    );

    let path = std::env::join_paths([&only_podman, &both]).expect("a PATH");
    let engine = Engine::detect(Some(&path)).expect("docker is found");
    assert_eq!((engine.kind(), engine.program()), (EngineKind::Docker, &*both.join("docker")));

    let error = Engine::detect(Some(dir.path().as_os_str())).expect_err("no engine");
    assert!(error.to_string().starts_with("no container engine"), "{error}");
    assert_eq!(Engine::at("/opt/bin/podman-remote").kind(), EngineKind::Podman);
    assert_eq!(Engine::at("/tmp/fake-engine").kind(), EngineKind::Docker);
}

#[test]
fn a_checkpoint_is_under_models() {
    let dirs = Dirs::new();
    let node = node(&dirs.path("store"), false);
    assert_eq!(
        container_checkpoint_path(&node, "kimi-k3").as_deref(),
        Some("/models/moonshotai/Kimi-K3")
    );
    assert_eq!(container_checkpoint_path(&node, "other"), None);
}
