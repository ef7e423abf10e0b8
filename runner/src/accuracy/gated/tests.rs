//! Tests of the gated fetch against a real HTTP server on loopback that plays the hub
//! (wiremock, on its own thread): the token goes in a header, the snapshot lands in the hub
//! cache's layout, a second fetch asks nothing, and what a hostile hub answers is refused.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::*;

const REVISION: &str = "0123456789abcdef0123456789abcdef01234567";

/// A file body that makes the hub answer with a redirect to the address after it.
const REDIRECT: &str = "redirect:";

/// A request the hub saw: its path (with its query) and its `Authorization` header.
type Seen = (String, Option<String>);

/// A server on loopback (its own thread): answers each request with `answer` and records its
/// path and `Authorization` header.
struct Recorder {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    _server: MockServer,
}

/// What a [`Recorder`]'s server does with a request: record it, then answer.
struct Answer {
    seen: Arc<Mutex<Vec<Seen>>>,
    answer: Box<dyn Fn(&str) -> ResponseTemplate + Send + Sync>,
}

impl Respond for Answer {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut path = request.url.path().to_owned();
        if let Some(query) = request.url.query() {
            path = format!("{path}?{query}");
        }
        let auth = request
            .headers
            .get("Authorization")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        self.seen.lock().expect("the record").push((path.clone(), auth));
        (self.answer)(&path)
    }
}

fn recorder(
    address: &str,
    answer: impl Fn(&str) -> ResponseTemplate + Send + Sync + 'static,
) -> Recorder {
    let listener = TcpListener::bind(address).expect("a port on loopback");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime to set the server up");
    let respond = Answer { seen: Arc::clone(&seen), answer: Box::new(answer) };
    let server = runtime.block_on(async {
        let server = MockServer::builder().listener(listener).start().await;
        Mock::given(any()).respond_with(respond).mount(&server).await;
        server
    });
    Recorder { url, seen, _server: server }
}

/// A hub on loopback: serves `listing` for the revision and `files` by name.
fn hub(listing: serde_json::Value, files: &[(&str, &str)]) -> Recorder {
    let files: Vec<(String, String)> =
        files.iter().map(|(name, body)| ((*name).to_owned(), (*body).to_owned())).collect();
    let listing_path = format!("/api/datasets/org/gated-set/revision/{REVISION}");
    let file_prefix = format!("/datasets/org/gated-set/resolve/{REVISION}/");
    recorder("127.0.0.1:0", move |path| {
        let body = if path == listing_path {
            Some(listing.to_string())
        } else {
            path.strip_prefix(&file_prefix).and_then(|name| {
                files.iter().find(|(file, _)| file == name).map(|(_, body)| body.clone())
            })
        };
        match body {
            // A file the hub hands to another host, as it hands downloads to its CDN.
            Some(body) if body.starts_with(REDIRECT) => {
                ResponseTemplate::new(302).insert_header("Location", &body[REDIRECT.len()..])
            }
            Some(body) => ResponseTemplate::new(200).set_body_string(body),
            None => ResponseTemplate::new(404).set_body_string("no"),
        }
    })
}

fn dataset() -> HubDataset {
    HubDataset::parse(&format!("org/gated-set@{REVISION}")).expect("a dataset")
}

#[test]
fn a_gated_dataset_is_fetched_with_the_token_in_a_header_into_the_hub_layout_once() {
    let listing = serde_json::json!({"siblings": [
        {"rfilename": "README.md"}, {"rfilename": "data/test.jsonl"}
    ]});
    let hub = hub(listing, &[("README.md", "# gated\n"), ("data/test.jsonl", "{\"q\": 1}\n")]);
    let cache = tempfile::tempdir().expect("a temporary directory");
    let root = cache_root(cache.path());
    let snapshot = fetch(&hub.url, &dataset(), Some("hf_secretvalue"), &root).expect("fetched");
    assert_eq!(snapshot, root.join(format!("hub/datasets--org--gated-set/snapshots/{REVISION}")));
    assert_eq!(
        std::fs::read_to_string(snapshot.join("data/test.jsonl")).expect("read"),
        "{\"q\": 1}\n"
    );
    let seen = hub.seen.lock().expect("the record").clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    for (path, auth) in &seen {
        assert_eq!(auth.as_deref(), Some("Bearer hf_secretvalue"), "{path}");
        assert!(!path.contains("hf_secretvalue"), "{path}");
    }
    // Nothing but the snapshot is left in the cache.
    let left: Vec<String> = std::fs::read_dir(snapshot.parent().expect("snapshots"))
        .expect("the folder")
        .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, [REVISION]);
    // A second fetch reuses the snapshot without asking the hub.
    fetch(&hub.url, &dataset(), Some("hf_secretvalue"), &root).expect("cached");
    assert_eq!(hub.seen.lock().expect("the record").len(), 3);
}

#[test]
fn what_a_hostile_or_failing_hub_answers_is_refused_and_leaves_no_snapshot() {
    let cases = [
        (
            serde_json::json!({"siblings": [{"rfilename": "../escape"}]}),
            "not a plain relative path",
        ),
        (
            serde_json::json!({"siblings": [{"rfilename": "/etc/passwd"}]}),
            "not a plain relative path",
        ),
        (
            serde_json::json!({"siblings": [{"rfilename": ".git/config"}]}),
            "not a plain relative path",
        ),
        (serde_json::json!({"files": []}), "no siblings array"),
        (
            serde_json::json!({"siblings": [{"rfilename": "missing.jsonl"}]}),
            "the file missing.jsonl",
        ),
    ];
    for (listing, expect) in cases {
        let hub = hub(listing.clone(), &[]);
        let cache = tempfile::tempdir().expect("a temporary directory");
        let root = cache_root(cache.path());
        let error = fetch(&hub.url, &dataset(), None, &root).expect_err("refused").to_string();
        assert!(error.contains(expect), "{listing}: {error}");
        assert!(error.starts_with(&format!("dataset org/gated-set@{REVISION}")), "{error}");
        assert!(!root.join("hub").join(dataset().snapshot()).exists(), "{listing}");
        // A public fetch sends no Authorization header.
        assert!(hub.seen.lock().expect("the record").iter().all(|(_, auth)| auth.is_none()));
    }
}

#[test]
fn the_token_goes_only_to_the_hub_not_to_the_host_a_redirect_names() {
    // The "CDN": another host (127.0.0.2, on loopback) that records what it is sent.
    let cdn =
        recorder("127.0.0.2:0", |_| ResponseTemplate::new(200).set_body_string("{\"q\": 2}\n"));
    let (cdn_url, cdn_seen) = (cdn.url.clone(), Arc::clone(&cdn.seen));
    let listing = serde_json::json!({"siblings": [{"rfilename": "data/test.jsonl"}]});
    let signed = format!("{REDIRECT}{cdn_url}/signed/test.jsonl?sig=abc");
    let hub = hub(listing, &[("data/test.jsonl", &signed)]);
    let cache = tempfile::tempdir().expect("a temporary directory");
    let root = cache_root(cache.path());
    let snapshot = fetch(&hub.url, &dataset(), Some("hf_secretvalue"), &root).expect("fetched");
    assert_eq!(
        std::fs::read_to_string(snapshot.join("data/test.jsonl")).expect("the file"),
        "{\"q\": 2}\n"
    );
    let hub_seen = hub.seen.lock().expect("the record").clone();
    assert!(hub_seen.iter().all(|(_, auth)| auth.as_deref() == Some("Bearer hf_secretvalue")));
    let cdn_seen = cdn_seen.lock().expect("the record").clone();
    assert_eq!(cdn_seen, [("/signed/test.jsonl?sig=abc".to_owned(), None)], "{cdn_seen:?}");
}

#[test]
fn a_listing_over_its_limit_is_refused_naming_the_limit() {
    let huge =
        serde_json::json!({"siblings": [], "padding": "x".repeat(MAX_LISTING_BYTES as usize)});
    let hub = hub(huge, &[]);
    let cache = tempfile::tempdir().expect("a temporary directory");
    let root = cache_root(cache.path());
    let error = fetch(&hub.url, &dataset(), None, &root).expect_err("refused").to_string();
    assert!(error.contains(&format!("larger than the {MAX_LISTING_BYTES} bytes")), "{error}");
    assert!(!root.join("hub").join(dataset().snapshot()).exists());
}
