use prgate_gate::GateConfig;
use prgate_gate::drift::{self, guards};
use prgate_gate::history::{
    CellProvenance, LEDGER_VERSION, Line, Merged, SpeedChange, parse_ledger,
};
use sha2::{Digest as _, Sha256};

use super::*;

const HOSTILE: &str = "</script><img src=x onerror=alert(1)> & \u{2028} @team";

fn merged(pr: u64, title: &str, log_ratio: f64) -> Line {
    Line::Merged(Merged {
        version: LEDGER_VERSION,
        at: "2026-12-01T15:00:00Z".to_owned(),
        pr,
        title: title.to_owned(),
        url: Some(format!("https://github.com/o/r/pull/{pr}")),
        merge_commit: "m".repeat(40),
        head_commit: "h".repeat(40),
        base_commit: Some("0123456789abcdef0123456789abcdef01234567".to_owned()),
        run: Some("javascript:alert(1)".to_owned()),
        verdict: None,
        speed: vec![SpeedChange {
            model: "kimi<k31>".to_owned(),
            concurrency: 1,
            covered: true,
            provenance: CellProvenance::default(),
            change: log_ratio.exp() - 1.0,
            interval: (0.0, 0.0),
            log_ratio,
            standard_error: 0.003,
            degrees_of_freedom: 9.0,
            pairs: 5,
        }],
        accuracy: Vec::new(),
        note: None,
    })
}

fn five_small_losses() -> (drift::History, Vec<Guard>) {
    let config = GateConfig::defaults();
    let lines: Vec<Line> =
        (1..=5).map(|pr| merged(pr, if pr == 3 { HOSTILE } else { "a fix" }, 0.0149)).collect();
    let history = drift::history(&lines, &config);
    let guards = guards(&history, &config);
    (history, guards)
}

#[test]
fn the_vendored_chart_js_is_the_release_it_names() {
    let digest = Sha256::digest(CHART_JS.as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    assert_eq!(hex, CHART_JS_SHA256);
    assert!(
        CHART_JS.contains(&format!("Chart.js v{CHART_JS_VERSION}")),
        "the file names its version"
    );
    assert!(CHART_JS_LICENSE.starts_with("The MIT License"));
}

#[test]
fn the_page_escapes_what_a_pr_wrote_and_links_only_to_web_pages() {
    let (history, guards) = five_small_losses();
    let files = render_page(&PageInput {
        history: &history,
        guards: &guards,
        repository: Some("o/r"),
        generated_at: "2026-12-09T00:00:00Z",
        settings: "budget TPOT +3%",
    })
    .expect("rendered");
    let paths: Vec<&str> = files.iter().map(|file| file.path).collect();
    assert_eq!(
        paths,
        [
            "index.html",
            "assets/chart.umd.min.js",
            "assets/chart.js-LICENSE.md",
            "assets/history.js",
            "assets/history.css"
        ]
    );
    let html = &files[0].contents;
    assert!(!html.contains("<img"), "no element from a title");
    assert_eq!(html.matches("</script>").count(), 3, "only the page's own scripts end");
    assert!(html.contains("&lt;&#47;script&gt;") || html.contains("&lt;/script&gt;"), "{html}");
    assert!(html.contains("\\u003c/script\\u003e\\u003cimg"), "the data escapes it too");
    assert!(!html.contains("javascript:"), "a run link that is not a web page is not linked");
    assert!(html.contains("href=\"https://github.com/o/r/pull/3\""));
    assert!(html.contains("kimi&lt;k31&gt;"));
    // The embedded data parses back, with every point the chain has.
    let start = html.find("id=\"prgate-history-data\">").expect("the data") + 25;
    let end = start + html[start..].find("</script>").expect("its end");
    assert!(!html[start..end].contains('\u{2028}'), "no line separator in the script");
    let data: serde_json::Value = serde_json::from_str(&html[start..end]).expect("JSON");
    let points = data["charts"][0]["points"].as_array().expect("points");
    assert_eq!(points.len(), 6, "the reference and five PRs");
    assert_eq!(points[3]["title"], HOSTILE);
    assert_eq!(data["charts"][0]["budget"], 3.0);
    assert_eq!(data["charts"][0]["state"], "TRIPPED");
}

#[test]
fn the_alarm_and_the_check_name_the_prs_that_contributed_most() {
    let (history, guards) = five_small_losses();
    assert_eq!(
        alarm_words(&guards[0], &history),
        "kimi<k31> c=1: TPOT +7.7% [+6.5%, +9.0%] since 0123456789ab, over the +3.0% budget; most from #1 +1.5%, #2 +1.5%, #3 +1.5%"
    );
    let markdown = check_markdown(&history, &guards, Some("https://o.github.io/r/"));
    assert!(markdown.contains("❌ **1 guard(s) tripped:**"), "{markdown}");
    assert!(
        markdown.contains("kimi\\<k31\\>") || markdown.contains("kimi&lt;k31&gt;"),
        "{markdown}"
    );
    let human = check_human(&history, &guards);
    assert!(human.contains("TRIPPED  kimi<k31> c=1: TPOT +7.7%"), "{human}");
    let quiet = drift::history(&parse_ledger("").expect("empty"), &GateConfig::defaults());
    assert!(check_markdown(&quiet, &[], None).contains("✅ No guard is tripped."));
}
