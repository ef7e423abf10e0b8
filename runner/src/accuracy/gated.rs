//! A gated dataset, fetched by prgate itself so that no command a PR names ever gets the
//! token: the trusted half of a gated accuracy benchmark.
//!
//! A recipe's benchmark that reads a gated dataset names it, pinned: `hub-dataset =
//! "org/name@<40-hex commit>"`, with `token = "HF_TOKEN"`. Before the evaluator runs, prgate
//! (on the host, outside any container) asks the hub for that revision's file list and
//! downloads every file with the token in an `Authorization` header, into the node's cache in
//! `huggingface_hub`'s layout: `<cache-dir>/datasets/hub/datasets--org--name/snapshots/<commit>/`.
//! The folder is written under a temporary name and renamed when complete, so a folder that
//! exists is whole, and a second run reuses it without asking the hub. The evaluator's container
//! gets `<cache-dir>/datasets` read-only at `/datasets`, `HF_HUB_CACHE=/datasets/hub`,
//! `HF_DATASETS_OFFLINE=1`, and `PRGATE_DATASET` (the snapshot folder as it sees it); its
//! environment has no secret (`docs/container.md`).
//!
//! What the hub answers is checked like any untrusted input: at most [`MAX_FILES`] files, each
//! a plain relative path (no `..`, no absolute path, no `.git`), at most [`MAX_FILE_BYTES`]
//! bytes. The token never appears in a URL, a log or an error (errors name the dataset and the
//! file, not the request's headers). The hub's address is `HF_ENDPOINT` of the runner's
//! environment, else `https://huggingface.co`.

use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

/// The most files a dataset revision may have: 10 000.
pub const MAX_FILES: usize = 10_000;
/// The largest file fetched: 16 GiB.
pub const MAX_FILE_BYTES: u64 = 16 << 30;
/// The hub's address when the runner's `HF_ENDPOINT` is not set.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// The dataset's name as a recipe writes it, and its snapshot folder, are the recipe's.
pub use prgate_recipe::recipe::{HubDataset, NotAHubDataset};

/// Why a gated dataset could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum GatedError {
    #[error("dataset {dataset}: the hub answered {what}: {problem}")]
    Hub { dataset: String, what: String, problem: DownloadError },
    #[error("dataset {dataset}: {problem}")]
    Listing { dataset: String, problem: ListingError },
    #[error("dataset {dataset}: writing {path}: {source}")]
    Write { dataset: String, path: PathBuf, source: std::io::Error },
}

/// The node's dataset cache: `<cache-dir>/datasets`, which the evaluator gets read-only.
pub fn cache_root(cache_dir: &Path) -> PathBuf {
    cache_dir.join("datasets")
}

/// The hub's address: the runner's `HF_ENDPOINT`, else [`DEFAULT_ENDPOINT`].
pub fn endpoint() -> String {
    std::env::var("HF_ENDPOINT")
        .ok()
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned())
}

/// Makes sure `dataset` is in the cache at `root` (`<cache-dir>/datasets`), fetching it from
/// `endpoint` with `token` (none for a public dataset) when it is not; returns the snapshot
/// folder (host path).
///
/// The requests are prgate's own (ureq, with rustls and the webpki roots; no child process,
/// so the token is on no command line and in no environment): HTTPS or HTTP only, at most
/// `MAX_REDIRECTS` redirects, the `Authorization` header sent only to the host it was given
/// (never to another host a redirect names: the hub sends file downloads to a CDN with a
/// signed address), no proxy, an answer other than 200 an error naming its status, and no file
/// larger than its limit.
pub fn fetch(
    endpoint: &str,
    dataset: &HubDataset,
    token: Option<&str>,
    root: &Path,
) -> Result<PathBuf, GatedError> {
    let snapshot = root.join("hub").join(dataset.snapshot());
    if snapshot.is_dir() {
        return Ok(snapshot);
    }
    let hub =
        Hub { endpoint: endpoint.trim_end_matches('/'), dataset, token, name: dataset.to_string() };
    let parent = snapshot.parent().unwrap_or(root).to_path_buf();
    std::fs::create_dir_all(&parent).map_err(|source| hub.write_error(&parent, source))?;
    let partial = parent.join(format!(".{}.partial-{}", dataset.revision, std::process::id()));
    let _stale = std::fs::remove_dir_all(&partial);
    std::fs::create_dir(&partial).map_err(|source| hub.write_error(&partial, source))?;
    let listing_file = parent.join(format!(".{}.listing-{}", dataset.revision, std::process::id()));
    let written = hub
        .files(&listing_file)
        .and_then(|files| hub.download_files(&files, &partial))
        .and_then(|()| {
            std::fs::rename(&partial, &snapshot)
                .map_err(|source| hub.write_error(&snapshot, source))
        });
    let _listing = std::fs::remove_file(&listing_file);
    match written {
        Ok(()) => Ok(snapshot),
        Err(error) => {
            let _ = std::fs::remove_dir_all(&partial);
            // Another run may have completed the same snapshot meanwhile.
            if snapshot.is_dir() { Ok(snapshot) } else { Err(error) }
        }
    }
}

/// One dataset's snapshot on the hub: where it is, the token to ask with, and its name for
/// errors.
struct Hub<'a> {
    endpoint: &'a str,
    dataset: &'a HubDataset,
    token: Option<&'a str>,
    name: String,
}

impl Hub<'_> {
    fn write_error(&self, path: &Path, source: std::io::Error) -> GatedError {
        GatedError::Write { dataset: self.name.clone(), path: path.to_owned(), source }
    }

    /// The snapshot's files, from its file list (downloaded to `listing_file`).
    fn files(&self, listing_file: &Path) -> Result<Vec<String>, GatedError> {
        let Hub { endpoint, dataset, token, name } = self;
        let listing_url =
            format!("{endpoint}/api/datasets/{}/revision/{}", dataset.repo, dataset.revision);
        download(&listing_url, *token, listing_file, MAX_LISTING_BYTES).map_err(|problem| {
            GatedError::Hub { dataset: name.clone(), what: "the file list".to_owned(), problem }
        })?;
        let text = std::fs::read_to_string(listing_file)
            .map_err(|source| self.write_error(listing_file, source))?;
        let listing: serde_json::Value =
            serde_json::from_str(&text).map_err(|error| GatedError::Listing {
                dataset: name.clone(),
                problem: ListingError::NotJson(error.to_string()),
            })?;
        files_of(&listing).map_err(|problem| GatedError::Listing { dataset: name.clone(), problem })
    }

    /// Downloads `files` of the snapshot into `folder`.
    fn download_files(&self, files: &[String], folder: &Path) -> Result<(), GatedError> {
        let Hub { endpoint, dataset, token, name } = self;
        for file in files {
            let url =
                format!("{endpoint}/datasets/{}/resolve/{}/{file}", dataset.repo, dataset.revision);
            let target = folder.join(file);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|source| self.write_error(parent, source))?;
            }
            download(&url, *token, &target, MAX_FILE_BYTES).map_err(|problem| GatedError::Hub {
                dataset: name.clone(),
                what: format!("the file {file}"),
                problem,
            })?;
        }
        Ok(())
    }
}

/// The largest file list read: 16 MiB.
const MAX_LISTING_BYTES: u64 = 16 << 20;

/// The most redirects one download follows.
const MAX_REDIRECTS: u32 = 5;

/// How long one download may take in all: an hour.
const DOWNLOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

/// Why a download failed.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    /// What the hub answered, or why it could not be asked: the words are redacted.
    #[error("{0}")]
    Hub(String),
    #[error("{url}: larger than the {limit} bytes fetched at most")]
    TooLarge { url: String, limit: u64 },
    #[error("cannot create {}: {source}", path.display())]
    Create { path: PathBuf, source: std::io::Error },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// Why a hub's file list was refused.
#[derive(Debug, thiserror::Error)]
pub enum ListingError {
    #[error("the file list is not JSON: {0}")]
    NotJson(String),
    #[error("the file list has no siblings array")]
    NoSiblings,
    #[error("{0} files, more than the {MAX_FILES} fetched")]
    TooMany(usize),
    #[error("a sibling without an rfilename")]
    NoName,
    #[error("the file name {0:?} is not a plain relative path")]
    NotPlain(String),
}

/// Downloads `url` into `target` (a new file), at most `limit` bytes; the error says what the
/// hub answered or what failed, redacted.
fn download(
    url: &str,
    token: Option<&str>,
    target: &Path,
    limit: u64,
) -> Result<(), DownloadError> {
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .max_redirects(MAX_REDIRECTS)
            .redirect_auth_headers(ureq::config::RedirectAuthHeaders::SameHost)
            .timeout_global(Some(DOWNLOAD_TIMEOUT))
            .build(),
    );
    let mut request = agent.get(url);
    if let Some(token) = token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    let redacted =
        |message: String| DownloadError::Hub(crate::redact::redact(&message).into_owned());
    let response = request.call().map_err(|error| redacted(format!("{url}: {error}")))?;
    let status = response.status();
    if status != 200 {
        return Err(redacted(format!("{url}: the hub answered {status}")));
    }
    let mut file = std::fs::File::create_new(target)
        .map_err(|source| DownloadError::Create { path: target.to_path_buf(), source })?;
    let mut body = response.into_body().into_with_config().limit(limit).reader();
    std::io::copy(&mut body, &mut file).map_err(|error| {
        let over = error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<ureq::Error>())
            .is_some_and(|inner| matches!(inner, ureq::Error::BodyExceedsLimit(_)));
        if over {
            DownloadError::TooLarge { url: url.to_owned(), limit }
        } else {
            redacted(format!("{url}: reading the answer: {error}"))
        }
    })?;
    file.flush().map_err(|source| DownloadError::Write { path: target.to_path_buf(), source })
}

/// The files of a hub listing (`{"siblings": [{"rfilename": ...}]}`), checked.
fn files_of(listing: &serde_json::Value) -> Result<Vec<String>, ListingError> {
    let siblings = listing
        .get("siblings")
        .and_then(serde_json::Value::as_array)
        .ok_or(ListingError::NoSiblings)?;
    if siblings.len() > MAX_FILES {
        return Err(ListingError::TooMany(siblings.len()));
    }
    let mut files = Vec::with_capacity(siblings.len());
    for sibling in siblings {
        let file = sibling
            .get("rfilename")
            .and_then(serde_json::Value::as_str)
            .ok_or(ListingError::NoName)?;
        let plain = !file.is_empty()
            && !file.contains(['\\', '\0', '?', '#', '%'])
            && Path::new(file).components().all(|component| match component {
                Component::Normal(part) => !part.eq_ignore_ascii_case(".git"),
                _ => false,
            });
        if !plain {
            return Err(ListingError::NotPlain(file.to_owned()));
        }
        files.push(file.to_owned());
    }
    files.sort();
    files.dedup();
    Ok(files)
}

#[cfg(test)]
mod tests;
