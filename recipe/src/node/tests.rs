//! Tests of the node profile: the example, the defaults, and every kind of error.

use super::*;

/// The smallest valid profile; cases below replace or add lines.
const MINIMAL: &str = r#"name = "n1"
hardware = "mi355x"
checkpoint-store = "/data/models"
cache-dir = "/var/cache/prgate"
work-dir = "/var/lib/prgate"
[gpus]
ids = [0]
render-devices = ["/dev/dri/renderD128"]
[image]
name = "sglang:rocm"
"#;

/// Parses `text` and renders the profile, or the error as users see it.
fn check(text: &str) -> String {
    match NodeProfile::parse(text, "node.toml") {
        Ok(node) => {
            let gpus: Vec<String> = node
                .gpus()
                .iter()
                .map(|gpu| format!("{}={}", gpu.id, gpu.render_device.display()))
                .collect();
            let checkpoints: Vec<String> = node
                .checkpoints()
                .keys()
                .map(|name| {
                    let path = node.checkpoint_path(name).unwrap_or_default();
                    format!("{name} -> {}", path.display())
                })
                .collect();
            format!(
                "ok\nname: {}\nhardware: {}\ngpus ({}): {}\nimage: {} {:?}\nstore: {}\n\
                 checkpoints: {}\nsecrets: {:?}\ncache: {}\nwork: {}\nports: {:?}",
                node.name(),
                node.hardware(),
                node.gpu_count(),
                gpus.join(", "),
                node.image().name,
                node.image().digest,
                node.checkpoint_store().display(),
                checkpoints.join(", "),
                node.secrets(),
                node.cache_dir().display(),
                node.work_dir().display(),
                node.ports(),
            )
        }
        Err(error) => format!("error: {error}"),
    }
}

/// `MINIMAL` with the first line starting with `key =` replaced by `line`, or `line` added at the top
/// (before any table) when no line starts so.
fn with(key: &str, line: &str) -> String {
    let prefix = format!("{key} =");
    if MINIMAL.lines().any(|existing| existing.starts_with(&prefix)) {
        let mut replaced = false;
        let lines: Vec<&str> = MINIMAL
            .lines()
            .map(|existing| {
                if !replaced && existing.starts_with(&prefix) {
                    replaced = true;
                    line
                } else {
                    existing
                }
            })
            .collect();
        lines.join("\n") + "\n"
    } else {
        format!("{line}\n{MINIMAL}")
    }
}

#[test]
fn the_example_parses() {
    insta::assert_snapshot!(check(EXAMPLE));
}

#[test]
fn optional_keys_take_their_defaults() {
    insta::assert_snapshot!(check(MINIMAL), @r#"
    ok
    name: n1
    hardware: mi355x
    gpus (1): 0=/dev/dri/renderD128
    image: sglang:rocm None
    store: /data/models
    checkpoints: 
    secrets: {}
    cache: /var/cache/prgate
    work: /var/lib/prgate
    ports: None
    "#);
}

#[test]
fn secrets_come_from_prefixed_environment_variables() {
    assert_eq!(secret_env_var("HF_TOKEN"), "PRGATE_SECRET_HF_TOKEN");
}

#[test]
fn every_kind_of_error_names_the_file_the_key_and_the_value() {
    let cases: Vec<(&str, String)> = vec![
        ("not toml", "name = \n".to_owned()),
        ("empty file", String::new()),
        ("unknown key", with("gpu-count", "gpu-count = 8")),
        ("wrong type", with("name", "name = 3")),
        ("missing image", MINIMAL.replace("[image]\nname = \"sglang:rocm\"\n", "")),
        ("bad name", with("name", "name = \"node 1\"")),
        ("bad hardware", with("hardware", "hardware = \"MI355X\"")),
        ("no gpus", with("ids", "ids = []")),
        ("negative gpu id", with("ids", "ids = [-1]")),
        ("devices do not match ids", with("ids", "ids = [0, 1]")),
        (
            "gpu listed twice",
            with("ids", "ids = [0, 0]").replace(
                "[\"/dev/dri/renderD128\"]",
                "[\"/dev/dri/renderD128\", \"/dev/dri/renderD136\"]",
            ),
        ),
        ("bad render device", with("render-devices", "render-devices = [\"/dev/dri/card0\"]")),
        ("image with digest in name", MINIMAL.replace("sglang:rocm", "sglang@sha256:00")),
        ("bad digest", format!("{MINIMAL}digest = \"sha256:XYZ\"\n")),
        ("relative store", with("checkpoint-store", "checkpoint-store = \"models\"")),
        ("root cache", with("cache-dir", "cache-dir = \"/\"")),
        ("dotdot work dir", with("work-dir", "work-dir = \"/var/../tmp\"")),
        ("bad checkpoint name", format!("{MINIMAL}[checkpoints]\n\"a b\" = \"x\"\n")),
        ("escaping checkpoint path", format!("{MINIMAL}[checkpoints]\nm = \"../x\"\n")),
        ("absolute checkpoint path", format!("{MINIMAL}[checkpoints]\nm = \"/x\"\n")),
        ("bad secret name", with("secrets", "secrets = [\"hf-token\"]")),
        ("secret listed twice", with("secrets", "secrets = [\"HF_TOKEN\", \"HF_TOKEN\"]")),
        ("privileged port", format!("{MINIMAL}[ports]\nfirst = 80\nlast = 90\n")),
        ("empty port range", format!("{MINIMAL}[ports]\nfirst = 31000\nlast = 30000\n")),
        ("port out of range", format!("{MINIMAL}[ports]\nfirst = 30000\nlast = 70000\n")),
    ];
    let rendered: Vec<String> =
        cases.iter().map(|(name, text)| format!("## {name}\n{}", check(text))).collect();
    insta::assert_snapshot!(rendered.join("\n\n"));
}

#[test]
fn the_health_table() {
    let health = |table: &str| {
        let text = format!("{MINIMAL}[health]\n{table}\n");
        match NodeProfile::parse(&text, "node.toml") {
            Ok(node) => {
                let health = node.health();
                format!(
                    "{} {} ecc<={} {}x/{}s dir={:?} drain={} canary={:?}",
                    health.amd_smi().display(),
                    health.rocm_smi().display(),
                    health.max_correctable_ecc(),
                    health.policy().strikes,
                    health.policy().window.as_secs(),
                    health.dir(),
                    health.slurm_drain(),
                    health.canary(),
                )
            }
            Err(error) => format!("error: {error}"),
        }
    };
    let cases = [
        ("", "amd-smi rocm-smi ecc<=100 3x/604800s dir=None drain=false canary=[]"),
        (
            "amd-smi = \"/opt/rocm/bin/amd-smi\"\nrocm-smi = \"/opt/rocm/bin/rocm-smi\"\nmax-correctable-ecc = 0\nstrikes = 1\nwindow = \"36h\"\ndir = \"/shared/prgate/health\"\nslurm-drain = true\ncanary = [\"/opt/prgate/canary.sh\", \"--quick\"]",
            "/opt/rocm/bin/amd-smi /opt/rocm/bin/rocm-smi ecc<=0 1x/129600s dir=Some(\"/shared/prgate/health\") drain=true canary=[\"/opt/prgate/canary.sh\", \"--quick\"]",
        ),
        ("window = \"7d\"", "amd-smi rocm-smi ecc<=100 3x/604800s dir=None drain=false canary=[]"),
        (
            "strikes = 0",
            "error: node.toml: health.strikes = 0: must be 1 or more: how many strikes drain the node",
        ),
        (
            "window = \"a week\"",
            "error: node.toml: health.window = \"a week\": must be a window such as \"7d\", \"36h\" or \"90m\"",
        ),
        (
            "window = \"0d\"",
            "error: node.toml: health.window = \"0d\": must be a window such as \"7d\", \"36h\" or \"90m\"",
        ),
        (
            "dir = \"health\"",
            "error: node.toml: health.dir = \"health\": must be an absolute path with no empty, . or .. segments",
        ),
        (
            "amd-smi = \"/opt/my tools/amd-smi\"",
            "error: node.toml: health.amd-smi = \"/opt/my tools/amd-smi\": must be a program's name or path, without blanks",
        ),
        ("canary = [\"\"]", "error: node.toml: health.canary = [\"\"]: names no program"),
        ("strike = 3", "error: node.toml: TOML parse error at line 12, column 1"),
    ];
    for (table, expect) in cases {
        let got = health(table);
        assert!(got.starts_with(expect), "{table}:\n{got}\nnot\n{expect}");
        if table.starts_with("strike ") {
            assert!(got.contains("unknown field `strike`"), "{got}");
        }
    }
}

#[test]
fn durations_in_each_spelling() {
    let cases = [
        (0, "0s", "0s", "0s"),
        (45, "45s", "45s", "45s"),
        (90, "1m30s", "90s", "90s"),
        (90 * 60, "1h30m", "90m", "5400s"),
        (5430, "1h30m30s", "5430s", "5430s"),
        (36 * 3600, "36h", "36h", "129600s"),
        (7 * 86_400, "168h", "7d", "604800s"),
        (86_401, "24h1s", "86401s", "86401s"),
    ];
    for (seconds, units, largest, plain) in cases {
        let duration = Duration::from_secs(seconds);
        let written = [Spelling::Units, Spelling::LargestUnit, Spelling::Seconds]
            .map(|spelling| write_duration(duration, spelling));
        assert_eq!(written, [units, largest, plain], "{seconds}");
    }
}

proptest::proptest! {
    #[test]
    fn a_written_duration_reads_back_the_same(
        seconds in 1..=crate::recipe::MAX_DURATION.as_secs(),
        millis in 0..1000_u64,
    ) {
        let duration = Duration::from_secs(seconds) + Duration::from_millis(millis);
        let whole = Duration::from_secs(seconds);
        for spelling in [Spelling::Units, Spelling::Seconds] {
            let text = write_duration(duration, spelling);
            proptest::prop_assert_eq!(crate::recipe::parse_duration(&text), Ok(whole), "{}", text);
        }
        let text = write_duration(duration, Spelling::LargestUnit);
        proptest::prop_assert_eq!(parse_window(&text), Ok(whole), "{}", text);
    }

    #[test]
    fn a_window_of_whole_days_reads_back_the_same(days in 1..=10_000_u64) {
        let window = Duration::from_secs(days * 86_400);
        let text = write_duration(window, Spelling::LargestUnit);
        proptest::prop_assert_eq!(parse_window(&text), Ok(window), "{}", text);
    }
}
