//! The content repository: append-only claim files.
//!
//! Small contents share the current claim file until it holds 1 MiB; a content of 1 MiB or
//! more gets a file of its own. Content is immutable: a processor that changes content writes
//! a new claim. Reference counts live in memory only: they are rebuilt from the flow-file
//! repository at recovery, and a claim file is deleted when no flow file refers to it and it
//! is no longer written to. Provenance keeps no content (there is no replay), so it holds no
//! claim.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::flowfile::ContentClaim;

/// A claim file is closed for appends once it holds this much; larger contents get their own.
pub const CLAIM_FILE_SIZE: u64 = 1 << 20;

/// Append-only claim files in one directory.
#[derive(Debug)]
pub struct ContentRepository {
    dir: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The shared claim file being appended to: (number, file, length so far).
    current: Option<(u64, Arc<File>, u64)>,
    next_file: u64,
    /// Files written since the last sync.
    dirty: HashMap<u64, Arc<File>>,
    /// Flow files referring to each file (committed state only).
    refs: HashMap<u64, u64>,
    /// Open handles for reading.
    readers: HashMap<u64, Arc<File>>,
    /// Files still taking appends.
    open_for_append: HashSet<u64>,
}

fn claim_path(dir: &Path, file: u64) -> PathBuf {
    dir.join(format!("{file:016}.claim"))
}

impl ContentRepository {
    /// Opens `dir`, given the reference count of every claim file that committed flow files
    /// use; every other claim file is garbage from sessions that never committed and is
    /// deleted.
    ///
    /// # Errors
    /// I/O errors listing or deleting files.
    pub fn open(dir: &Path, refs: HashMap<u64, u64>) -> io::Result<ContentRepository> {
        fs::create_dir_all(dir)?;
        let mut next_file = 0;
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(n) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".claim"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            next_file = next_file.max(n + 1);
            if !refs.contains_key(&n) {
                fs::remove_file(entry.path())?;
            }
        }
        let next_file = next_file.max(refs.keys().max().map_or(0, |m| m + 1));
        Ok(ContentRepository {
            dir: dir.to_path_buf(),
            state: Mutex::new(State {
                next_file,
                refs,
                ..State::default()
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `data` as a new claim (not yet synced: see [`ContentRepository::sync`]).
    ///
    /// # Errors
    /// I/O errors creating or writing the claim file.
    pub fn write(&self, data: &[u8]) -> io::Result<ContentClaim> {
        let mut st = self.lock();
        if data.len() as u64 >= CLAIM_FILE_SIZE {
            let n = st.next_file;
            st.next_file += 1;
            let mut file = File::create(claim_path(&self.dir, n))?;
            file.write_all(data)?;
            st.dirty.insert(n, Arc::new(file));
            return Ok(ContentClaim {
                file: n,
                offset: 0,
                len: data.len() as u64,
            });
        }
        if st
            .current
            .as_ref()
            .is_none_or(|(_, _, len)| *len >= CLAIM_FILE_SIZE)
        {
            if let Some((old, _, _)) = st.current.take() {
                st.open_for_append.remove(&old);
                Self::delete_if_unused(&self.dir, &mut st, old);
            }
            let n = st.next_file;
            st.next_file += 1;
            let file = OpenOptions::new()
                .create_new(true)
                .append(true)
                .read(true)
                .open(claim_path(&self.dir, n))?;
            st.open_for_append.insert(n);
            st.current = Some((n, Arc::new(file), 0));
        }
        let (n, file, len) = st.current.as_mut().expect("a current claim file");
        let offset = *len;
        (&**file).write_all(data)?;
        *len += data.len() as u64;
        let (n, file) = (*n, Arc::clone(file));
        st.dirty.insert(n, file);
        Ok(ContentClaim {
            file: n,
            offset,
            len: data.len() as u64,
        })
    }

    /// Reads a claim's bytes.
    ///
    /// # Errors
    /// I/O errors, or a claim past the end of its file (a lost or truncated claim file).
    pub fn read(&self, claim: &ContentClaim) -> io::Result<Vec<u8>> {
        let file = {
            let mut st = self.lock();
            match st.readers.get(&claim.file) {
                Some(f) => Arc::clone(f),
                None => {
                    let f = Arc::new(File::open(claim_path(&self.dir, claim.file))?);
                    if st.readers.len() > 256 {
                        st.readers.clear();
                    }
                    st.readers.insert(claim.file, Arc::clone(&f));
                    f
                }
            }
        };
        let mut buf = vec![0; claim.len as usize];
        file.read_exact_at(&mut buf, claim.offset)?;
        Ok(buf)
    }

    /// Syncs every claim file written since the last call: called by the journal's committer
    /// before it writes the frames that point to the content.
    ///
    /// # Errors
    /// The first I/O error; the caller poisons the repository.
    pub fn sync(&self) -> io::Result<()> {
        let dirty: Vec<(u64, Arc<File>)> = self.lock().dirty.drain().collect();
        for (_, file) in &dirty {
            file.sync_data()?;
        }
        Ok(())
    }

    /// Applies committed reference changes (+1 for a new reference, -1 for a dropped one) and
    /// deletes claim files nobody needs any more.
    pub fn adjust_refs(&self, changes: &[(u64, i64)]) {
        if changes.is_empty() {
            return;
        }
        let mut st = self.lock();
        for &(file, delta) in changes {
            let count = st.refs.entry(file).or_insert(0);
            *count = (*count as i64 + delta).max(0) as u64;
            if *count == 0 {
                Self::delete_if_unused(&self.dir, &mut st, file);
            }
        }
    }

    /// Deletes the claim files of `claims` that no committed flow file refers to (after a
    /// rollback).
    pub fn release_uncommitted(&self, claims: &[ContentClaim]) {
        let mut st = self.lock();
        for c in claims {
            if st.refs.get(&c.file).copied().unwrap_or(0) == 0 {
                Self::delete_if_unused(&self.dir, &mut st, c.file);
            }
        }
    }

    fn delete_if_unused(dir: &Path, st: &mut State, file: u64) {
        if st.open_for_append.contains(&file) || st.refs.get(&file).copied().unwrap_or(0) > 0 {
            return;
        }
        st.refs.remove(&file);
        st.readers.remove(&file);
        st.dirty.remove(&file);
        // A missing file is already what we want.
        let _ = fs::remove_file(claim_path(dir, file));
    }

    /// Number of claim files on disk that flow files refer to.
    pub fn referenced_files(&self) -> usize {
        self.lock().refs.values().filter(|c| **c > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_claims_share_a_file_large_ones_get_their_own_and_unused_files_go() {
        let dir = tempfile::tempdir().unwrap();
        let repo = ContentRepository::open(dir.path(), HashMap::new()).unwrap();
        let a = repo.write(b"hello").unwrap();
        let b = repo.write(b"world").unwrap();
        assert_eq!((a.file, b.file, b.offset), (0, 0, 5));
        let big = repo.write(&vec![7u8; CLAIM_FILE_SIZE as usize]).unwrap();
        assert_ne!(big.file, a.file);
        repo.sync().unwrap();
        assert_eq!(repo.read(&b).unwrap(), b"world");
        repo.adjust_refs(&[(big.file, 1), (big.file, -1)]);
        assert!(!claim_path(dir.path(), big.file).exists());
        // The shared file stays while it takes appends.
        repo.adjust_refs(&[(a.file, 1), (a.file, -1)]);
        assert!(claim_path(dir.path(), a.file).exists());
        drop(repo);
        // Recovery: only referenced files survive.
        let repo = ContentRepository::open(dir.path(), HashMap::new()).unwrap();
        assert!(!claim_path(dir.path(), a.file).exists());
        assert_eq!(repo.referenced_files(), 0);
    }
}
