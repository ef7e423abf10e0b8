//! Reading a file of an untrusted tree: a PR's exported tree, or a folder a container (or a
//! command a PR's recipe names) writes into.
//!
//! API: [`read`]`(root, relative, limit)` returns the bytes, [`read_to_string`] the text
//! (bytes that are not UTF-8 replaced), [`open`]`(root, relative)` an open [`UntrustedFile`]
//! (a `File` checked to be regular, with its length) for reading in parts; [`read_path`] and
//! [`open_path`] take a full path and the root it must lie below, [`open_in_parent`] a file
//! whose parent folder is the root (a log), and [`read_tail`] reads an open file's end. Every error is an
//! [`UntrustedFileError`] naming the path and what was wrong with it ([`Problem`]).
//!
//! The root is trusted (prgate made it); nothing below it is. `relative` must be made of
//! normal components only (no `..`, no root, no prefix; `.` is skipped); every component is
//! opened relative to the previous one's descriptor with `O_NOFOLLOW`, so a symbolic link at
//! any depth is refused rather than followed, and the last one must be a regular file (a
//! fifo, a socket or a device is refused without blocking: it is opened with `O_NONBLOCK`).
//! Its size is checked against the caller's limit both before and while reading (a file that
//! grows while it is read is still cut off). What the file says is still data: this module
//! only guarantees that it is that file.
//!
//! What it leaves to others: what a missing file means (the callers' not-run or fail reason),
//! and directory listings (the callers walk what they create).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags};
use rustix::io::Errno;

/// The largest file a command may hand back (JUnit XML, metrics, timings, results): 64 MiB.
pub const MAX_RESULT_FILE: u64 = 64 * 1024 * 1024;

/// Why a file of an untrusted tree was not read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}; it is not read", path.display())]
pub struct UntrustedFileError {
    /// The file asked for, below its root.
    pub path: PathBuf,
    /// What was wrong with it.
    pub problem: Problem,
}

/// What was wrong with a file of an untrusted tree.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// The relative path has a `..`, a root or a prefix: it could leave the tree.
    #[error("the path leaves its tree (`{component}`)")]
    Escapes { component: String },
    /// The path is not below the root it must be read from.
    #[error("the path is not below {}", root.display())]
    NotBelow { root: PathBuf },
    /// A component (the file itself, or a folder on the way) is a symbolic link.
    #[error("`{}` is a symbolic link, which is not followed", component.display())]
    Link { component: PathBuf },
    /// A folder on the way is not a folder.
    #[error("`{}` is not a directory", component.display())]
    NotADirectory { component: PathBuf },
    /// The file is not a regular file.
    #[error("not a regular file (a {kind})")]
    NotRegular { kind: &'static str },
    /// The file is larger than the caller allows.
    #[error("more than the {limit} bytes allowed (at least {size})")]
    TooLarge { size: u64, limit: u64 },
    /// There is no such file (or a folder on the way is missing).
    #[error("no such file")]
    Missing,
    /// Reading failed for another reason.
    #[error("{0}")]
    Io(#[source] io::Error),
}

/// A regular file of an untrusted tree, open for reading.
#[derive(Debug)]
pub struct UntrustedFile {
    /// The open file.
    pub file: File,
    /// Its length when it was opened.
    pub len: u64,
}

/// The bytes of `root/relative`, a regular file of at most `limit` bytes reached without
/// following a link.
pub fn read(root: &Path, relative: &Path, limit: u64) -> Result<Vec<u8>, UntrustedFileError> {
    let error = |problem| UntrustedFileError { path: root.join(relative), problem };
    let opened = open(root, relative)?;
    if opened.len > limit {
        return Err(error(Problem::TooLarge { size: opened.len, limit }));
    }
    let mut bytes = Vec::new();
    opened
        .file
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| error(Problem::Io(source)))?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read > limit {
        return Err(error(Problem::TooLarge { size: read, limit }));
    }
    Ok(bytes)
}

/// The text of `root/relative` as [`read`] reads it; bytes that are not UTF-8 are replaced.
pub fn read_to_string(
    root: &Path,
    relative: &Path,
    limit: u64,
) -> Result<String, UntrustedFileError> {
    let bytes = read(root, relative, limit)?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
    })
}

/// [`read`] for a full `path`, which must lie below `root`.
pub fn read_path(root: &Path, path: &Path, limit: u64) -> Result<Vec<u8>, UntrustedFileError> {
    read(root, below(root, path)?, limit)
}

/// [`open`] for a full `path`, which must lie below `root`.
pub fn open_path(root: &Path, path: &Path) -> Result<UntrustedFile, UntrustedFileError> {
    open(root, below(root, path)?)
}

/// [`open`] for a file whose folder prgate made but whose content (the file itself) a command
/// wrote, like a log in a container's output folder: the root is `path`'s parent.
pub fn open_in_parent(path: &Path) -> Result<UntrustedFile, UntrustedFileError> {
    let root = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path.file_name().map_or(Path::new(".."), Path::new);
    open(root, name).map_err(|error| UntrustedFileError { path: path.to_owned(), ..error })
}

/// Opens `root/relative` for reading: every component without following a link, and the last
/// one only if it is a regular file.
pub fn open(root: &Path, relative: &Path) -> Result<UntrustedFile, UntrustedFileError> {
    let error = |problem| UntrustedFileError { path: root.join(relative), problem };
    let names = components(relative).map_err(error)?;
    let Some((last, folders)) = names.split_last() else {
        return Err(error(Problem::NotRegular { kind: "directory" }));
    };
    let directory_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut folder: OwnedFd = rustix::fs::openat(CWD, root, directory_flags, Mode::empty())
        .map_err(|errno| error(classify_root(errno)))?;
    let mut walked = PathBuf::new();
    for name in folders {
        walked.push(name);
        folder = match rustix::fs::openat(
            &folder,
            *name,
            directory_flags | OFlags::NOFOLLOW,
            Mode::empty(),
        ) {
            Ok(next) => next,
            Err(errno) => return Err(error(classify(&folder, name, &walked, errno, true))),
        };
    }
    walked.push(last);
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&folder, *last, flags, Mode::empty())
        .map_err(|errno| error(classify(&folder, last, &walked, errno, false)))?;
    let stat = rustix::fs::fstat(&fd).map_err(|errno| error(Problem::Io(errno.into())))?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind != FileType::RegularFile {
        return Err(error(Problem::NotRegular { kind: kind_name(kind) }));
    }
    let file = File::from(fd);
    Ok(UntrustedFile { file, len: u64::try_from(stat.st_size).unwrap_or(0) })
}

/// The last `max_bytes` of `file` (all of it when it is shorter), and whether bytes before them
/// were left out.
pub fn read_tail(opened: UntrustedFile, max_bytes: u64) -> io::Result<(Vec<u8>, bool)> {
    let UntrustedFile { mut file, len } = opened;
    let start = len.saturating_sub(max_bytes);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(max_bytes).read_to_end(&mut bytes)?;
    Ok((bytes, start > 0))
}

/// `path` relative to `root`, when it lies below it.
fn below<'a>(root: &Path, path: &'a Path) -> Result<&'a Path, UntrustedFileError> {
    path.strip_prefix(root).map_err(|_| UntrustedFileError {
        path: path.to_owned(),
        problem: Problem::NotBelow { root: root.to_owned() },
    })
}

/// The names of `relative`'s components, when they are all plain names.
fn components(relative: &Path) -> Result<Vec<&std::ffi::OsStr>, Problem> {
    let mut names = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(name) => names.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(Problem::Escapes {
                    component: component.as_os_str().to_string_lossy().into_owned(),
                });
            }
        }
    }
    Ok(names)
}

/// What a failed open of the root means.
fn classify_root(errno: Errno) -> Problem {
    match errno {
        Errno::NOENT => Problem::Missing,
        Errno::NOTDIR => Problem::NotADirectory { component: PathBuf::from(".") },
        other => Problem::Io(other.into()),
    }
}

/// What a failed open of `name` in `folder` means: a link, not a directory, missing, or
/// another error. `walked` is the path so far, for the message.
fn classify(
    folder: &OwnedFd,
    name: &std::ffi::OsStr,
    walked: &Path,
    errno: Errno,
    wanted_directory: bool,
) -> Problem {
    let component = walked.to_owned();
    match rustix::fs::statat(folder, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => Problem::Link { component },
            FileType::Directory if wanted_directory => Problem::Io(errno.into()),
            _ if wanted_directory => Problem::NotADirectory { component },
            other => Problem::NotRegular { kind: kind_name(other) },
        },
        Err(Errno::NOENT) => Problem::Missing,
        Err(_) => match errno {
            Errno::NOENT => Problem::Missing,
            Errno::LOOP => Problem::Link { component },
            Errno::NOTDIR => Problem::NotADirectory { component },
            other => Problem::Io(other.into()),
        },
    }
}

/// A file type as the messages name it.
fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "file of unknown type",
    }
}

#[cfg(test)]
mod tests;
