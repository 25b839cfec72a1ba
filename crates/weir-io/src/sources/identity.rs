//! What a file-based source's read positions are positions *in*: the identity of every input
//! file, saved with each position and checked when a run resumes from it.
//!
//! A read position is a file index, a byte offset and a line number. It means something only
//! for the files the position was taken in; a resumed run lists its inputs again, so a file
//! replaced, edited, removed, or added in the middle of the list would shift or corrupt what
//! the positions point at (a run would mix old and new rows, or read some twice). So each
//! saved position carries the listing ([`FileIdentity`] per file: path, size, modification
//! time, inode and a checksum of the file's first and last 4 KiB), and a resumed reader
//! checks it against the files it found:
//!
//! - every file of the listing must still be there, at the same place in the list, with the
//!   same identity; otherwise the run is refused with [`SourceError::InputChanged`], naming
//!   the file and what changed;
//! - files listed after the last one of the saved listing (sorted after every file read
//!   before) are new input, appended: they are read after the saved files, shared out
//!   between the instances as a listing of their own.
//!
//! Cost: the checksums are read once per source (two reads of 4 KiB per file), on the first
//! position saved or checked; the encoded listing is kept, so a snapshot copies about 70
//! bytes per input file per instance.

use std::fs::File;
use std::path::PathBuf;
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use super::files::{InputFile, SourceError};

/// The bytes at each end of a file that its checksum covers.
const END_BLOCK: u64 = 4096;

/// What identifies one input file as it was when the source listed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileIdentity {
    pub path: PathBuf,
    pub len: u64,
    /// Modification time, in ns since the Unix epoch (0 where the platform has none).
    pub modified_ns: i128,
    /// Device and inode (0 where the platform has none).
    pub inode: (u64, u64),
    /// CRC32C of the first and last 4 KiB of the file's `len` bytes; `None` if it could not
    /// be read.
    pub ends_crc: Option<u32>,
}

/// What a file's metadata says about its identity, taken when the file is listed.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stamp {
    pub modified_ns: i128,
    pub inode: (u64, u64),
}

impl Stamp {
    pub(crate) fn of(meta: &std::fs::Metadata) -> Self {
        let modified_ns = meta
            .modified()
            .ok()
            .map(|t| match t.duration_since(UNIX_EPOCH) {
                Ok(d) => d.as_nanos() as i128,
                Err(e) => -(e.duration().as_nanos() as i128),
            })
            .unwrap_or(0);
        #[cfg(unix)]
        let inode = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let inode = (0, 0);
        Stamp { modified_ns, inode }
    }
}

/// The identity of `file`: its listed size and stamp, and the checksum of its ends read now.
pub(crate) fn identify(file: &InputFile) -> FileIdentity {
    FileIdentity {
        path: file.path.clone(),
        len: file.len,
        modified_ns: file.stamp.modified_ns,
        inode: file.stamp.inode,
        ends_crc: ends_crc(file).ok(),
    }
}

fn ends_crc(file: &InputFile) -> std::io::Result<u32> {
    use std::os::unix::fs::FileExt;
    let f = File::open(&file.path)?;
    let head = file.len.min(END_BLOCK);
    let tail_start = file.len.saturating_sub(END_BLOCK).max(head);
    let mut buf = vec![0u8; (head + (file.len - tail_start)) as usize];
    let (first, last) = buf.split_at_mut(head as usize);
    f.read_exact_at(first, 0)?;
    f.read_exact_at(last, tail_start)?;
    Ok(crc32c::crc32c(&buf))
}

/// A saved read position: the listing it belongs to and the reader's own position.
#[derive(Serialize, Deserialize)]
struct SavedRead<'a> {
    #[serde(borrow)]
    listing: &'a [u8],
    #[serde(borrow)]
    at: &'a [u8],
}

/// The position `at` of a reader of the files whose encoded listing is `listing`.
pub(crate) fn wrap(listing: &[u8], at: &[u8]) -> Vec<u8> {
    postcard::to_stdvec(&SavedRead { listing, at }).expect("a position always encodes")
}

/// Encodes a listing for [`wrap`].
pub(crate) fn encode_listing(files: &[FileIdentity]) -> Vec<u8> {
    postcard::to_stdvec(files).expect("a listing always encodes")
}

/// Checks a saved position (from [`wrap`]) against the files a resumed run found, whose
/// identities `current` gives (computed only as far as needed). Returns the reader's own
/// position and how many of the current files the saved listing covers; any files after
/// those were appended since.
///
/// # Errors
/// [`SourceError::Position`] for a damaged position; [`SourceError::InputChanged`] naming
/// the first saved file that is gone, moved in the list or changed.
pub(crate) fn unwrap<'a>(
    position: &'a [u8],
    files: &[InputFile],
    current: impl Fn(usize) -> FileIdentity,
) -> Result<(&'a [u8], usize), SourceError> {
    let damaged = |e: postcard::Error| SourceError::Position {
        reason: format!("a damaged read position ({e})"),
    };
    let saved: SavedRead<'a> = postcard::from_bytes(position).map_err(damaged)?;
    let listing: Vec<FileIdentity> = postcard::from_bytes(saved.listing).map_err(damaged)?;
    for (i, was) in listing.iter().enumerate() {
        let changed = |change: String| SourceError::InputChanged {
            path: was.path.clone(),
            change,
        };
        let Some(now) = files.get(i) else {
            return Err(changed("was removed".into()));
        };
        if now.path != was.path {
            return Err(if files.iter().any(|f| f.path == was.path) {
                SourceError::InputChanged {
                    path: now.path.clone(),
                    change: format!(
                        "was added among the files already listed (before {})",
                        was.path.display()
                    ),
                }
            } else {
                changed("was removed".into())
            });
        }
        if now.len != was.len {
            return Err(changed(format!(
                "changed size: {} bytes then, {} now",
                was.len, now.len
            )));
        }
        if now.stamp.inode != was.inode {
            return Err(changed("was replaced by another file of that name".into()));
        }
        if now.stamp.modified_ns != was.modified_ns {
            return Err(changed("was modified".into()));
        }
        if current(i).ends_crc != was.ends_crc {
            return Err(changed("has other content".into()));
        }
    }
    Ok((saved.at, listing.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::files::InputFiles;

    fn listing(files: &InputFiles) -> Vec<u8> {
        files.listing().to_vec()
    }

    fn check(position: &[u8], files: &InputFiles) -> Result<usize, SourceError> {
        files.unwrap_position(position).map(|(_, n)| n)
    }

    #[test]
    fn a_position_fits_the_same_files_and_files_appended_after_them() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "1\n2\n").unwrap();
        std::fs::write(dir.path().join("c"), "3\n").unwrap();
        let before = InputFiles::resolve(dir.path()).unwrap();
        let position = wrap(&listing(&before), b"at");
        assert_eq!(check(&position, &before).unwrap(), 2);
        std::fs::write(dir.path().join("d"), "4\n").unwrap();
        let after = InputFiles::resolve(dir.path()).unwrap();
        let (at, n) = after.unwrap_position(&position).unwrap();
        assert_eq!((at, n), (&b"at"[..], 2), "d is appended");
    }

    #[test]
    fn every_kind_of_change_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (a, c) = (dir.path().join("a"), dir.path().join("c"));
        let content = "x".repeat(10_000);
        std::fs::write(&a, &content).unwrap();
        std::fs::write(&c, "3\n").unwrap();
        let position = wrap(&listing(&InputFiles::resolve(dir.path()).unwrap()), b"");
        let refused = |position: &[u8], what: &str| {
            let now = InputFiles::resolve(dir.path()).unwrap();
            match check(position, &now) {
                Err(e @ SourceError::InputChanged { .. }) => e.to_string(),
                other => panic!("{what}: {other:?}"),
            }
        };
        // Added in the middle of the list.
        std::fs::write(dir.path().join("b"), "2\n").unwrap();
        let e = refused(&position, "added");
        assert!(e.contains("/b") && e.contains("added"), "{e}");
        std::fs::remove_file(dir.path().join("b")).unwrap();
        // Other content at either end, with the size and time kept (a change in the middle
        // of such a file is not seen: only the ends are read).
        let mtime = std::fs::metadata(&a).unwrap().modified().unwrap();
        let mut edited = content.clone().into_bytes();
        edited[9_999] = b'y';
        std::fs::write(&a, &edited).unwrap();
        File::options()
            .write(true)
            .open(&a)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let e = refused(&position, "content");
        assert!(e.contains("/a") && e.contains("other content"), "{e}");
        // Touched.
        std::fs::write(&a, &content).unwrap();
        let e = refused(&position, "touched");
        assert!(e.contains("/a") && e.contains("modified"), "{e}");
        // Another size.
        std::fs::write(&a, "short\n").unwrap();
        let e = refused(&position, "size");
        assert!(e.contains("/a") && e.contains("size"), "{e}");
        // Replaced by a rename: another inode.
        let position = wrap(&listing(&InputFiles::resolve(dir.path()).unwrap()), b"");
        let tmp = dir.path().join("new-c");
        std::fs::write(&tmp, "3\n").unwrap();
        std::fs::rename(&tmp, &c).unwrap();
        let e = refused(&position, "replaced");
        assert!(e.contains("/c") && e.contains("replaced"), "{e}");
        // Removed.
        std::fs::remove_file(&c).unwrap();
        let e = refused(&position, "removed");
        assert!(e.contains("/c") && e.contains("removed"), "{e}");
    }
}
