//! Tests of the gated fetch against a real HTTP server on loopback that plays the hub: the
//! token goes in a header, the snapshot lands in the hub cache's layout, a second fetch asks
//! nothing, and what a hostile hub answers is refused.

use std::sync::{Arc, Mutex};
use std::thread;

use super::*;

const REVISION: &str = "0123456789abcdef0123456789abcdef01234567";

/// A file body that makes the hub answer with a redirect to the address after it.
const REDIRECT: &str = "redirect:";

/// A request the hub saw: its path and its `Authorization` header.
type Seen = (String, Option<String>);

/// A hub on loopback: serves `listing` for the revision and `files` by name; records every
/// request's path and `Authorization` header.
struct Hub {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    _server: Arc<tiny_http::Server>,
}

fn hub(listing: serde_json::Value, files: &[(&str, &str)]) -> Hub {
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("a server"));
    let url = format!("http://{}", server.server_addr().to_ip().expect("an address"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let files: Vec<(String, String)> =
        files.iter().map(|(name, body)| ((*name).to_owned(), (*body).to_owned())).collect();
    let (serving, record) = (Arc::clone(&server), Arc::clone(&seen));
    thread::spawn(move || {
        for request in serving.incoming_requests() {
            let path = request.url().to_owned();
            let auth = request
                .headers()
                .iter()
                .find(|header| header.field.equiv("Authorization"))
                .map(|header| header.value.as_str().to_owned());
            record.lock().expect("the record").push((path.clone(), auth));
            let listing_path = format!("/api/datasets/org/gated-set/revision/{REVISION}");
            let file_prefix = format!("/datasets/org/gated-set/resolve/{REVISION}/");
            let body = if path == listing_path {
                Some(listing.to_string())
            } else {
                path.strip_prefix(&file_prefix).and_then(|name| {
                    files.iter().find(|(file, _)| file == name).map(|(_, body)| body.clone())
                })
            };
            let response = match body {
                // A file the hub hands to another host, as it hands downloads to its CDN.
                Some(body) if body.starts_with(REDIRECT) => {
                    let location =
                        tiny_http::Header::from_bytes("Location", &body[REDIRECT.len()..])
                            .expect("a header");
                    tiny_http::Response::from_string("").with_status_code(302).with_header(location)
                }
                Some(body) => tiny_http::Response::from_string(body),
                None => tiny_http::Response::from_string("no").with_status_code(404),
            };
            let _ = request.respond(response);
        }
    });
    Hub { url, seen, _server: server }
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
fn hub_datasets_are_pinned_plain_names() {
    let good = HubDataset::parse(&format!("openai/gsm8k@{REVISION}")).expect("good");
    assert_eq!(good.to_string(), format!("openai/gsm8k@{REVISION}"));
    for bad in [
        "openai/gsm8k",
        "openai/gsm8k@main",
        "openai@0123",
        "../x@0123456789abcdef0123456789abcdef01234567",
        "a/b/c@0123456789abcdef0123456789abcdef01234567",
        "a/.hidden@0123456789abcdef0123456789abcdef01234567",
        "a/b@0123456789ABCDEF0123456789abcdef01234567",
    ] {
        assert!(HubDataset::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_token_goes_only_to_the_hub_not_to_the_host_a_redirect_names() {
    // The "CDN": another host (127.0.0.2, on loopback) that records what it is sent.
    let cdn = tiny_http::Server::http("127.0.0.2:0").expect("a server on 127.0.0.2");
    let cdn_url = format!("http://{}", cdn.server_addr().to_ip().expect("an address"));
    let cdn_seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let record = Arc::clone(&cdn_seen);
    thread::spawn(move || {
        for request in cdn.incoming_requests() {
            let auth = request
                .headers()
                .iter()
                .find(|header| header.field.equiv("Authorization"))
                .map(|header| header.value.as_str().to_owned());
            record.lock().expect("the record").push((request.url().to_owned(), auth));
            let _ = request.respond(tiny_http::Response::from_string("{\"q\": 2}\n"));
        }
    });
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
