//! The content repository: append-only claim files.
//!
//! Small contents share the current claim file until it holds 1 MiB; a content of 1 MiB or
//! more gets a file of its own. Content is immutable: a processor that changes content writes
//! a new claim. Provenance keeps no content (there is no replay), so it holds no claim.
//!
//! # Reference counts
//!
//! Each claim file has a count of what refers to it: committed flow files, and claims written
//! but not yet committed or rolled back. [`ContentRepository::write`] and
//! [`ContentRepository::write_from`] count the new claim at once (the writer's hold), so a
//! claim file never goes while a session still holds content in it, committed or not. A commit
//! hands over its changes as one list ([`ContentRepository::adjust_refs`]): the writer's holds
//! released, a reference per flow file sent on, one fewer per flow file taken. The list is
//! summed per file before anything is applied, so a flow file passed on unchanged (−1 for its
//! input, +1 for its output) never takes its file through zero. A rollback releases the
//! writer's holds ([`ContentRepository::release_uncommitted`]). A claim file is deleted when
//! its count reaches zero and it takes no more appends.
//!
//! Counts live in memory only: recovery rebuilds them from the flow-file repository, and
//! every claim file no committed flow file refers to is deleted then.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::faults::{self, Step};
use crate::flowfile::ContentClaim;

/// A claim file is closed for appends once it holds this much; larger contents get their own.
pub const CLAIM_FILE_SIZE: u64 = 1 << 20;

/// From this size on, [`ContentRepository::copy_to`] copies in the kernel; below it, one
/// read through a cached handle costs less than opening the claim file.
const COPY_IN_KERNEL_FROM: u64 = 64 << 10;

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
    /// Committed flow files and uncommitted claims referring to each file.
    refs: HashMap<u64, u64>,
    /// Files created since the last sync: their directory entries are synced with them.
    created: bool,
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

    /// Appends `data` as a new claim (not yet synced: see [`ContentRepository::sync`]). The
    /// claim is counted at once as its writer's hold: the caller commits it (releasing the
    /// hold in the commit's [`ContentRepository::adjust_refs`]) or rolls it back
    /// ([`ContentRepository::release_uncommitted`]).
    ///
    /// # Errors
    /// I/O errors creating or writing the claim file. A shared claim file that failed an
    /// append takes no more claims (how much of the append reached it is unknown).
    pub fn write(&self, data: &[u8]) -> io::Result<ContentClaim> {
        let mut st = self.lock();
        if data.len() as u64 >= CLAIM_FILE_SIZE {
            let n = st.next_file;
            st.next_file += 1;
            let path = claim_path(&self.dir, n);
            let mut file = faults::create(&path)?;
            if let Err(e) = faults::step(Step::Write, &path, || file.write_all(data)) {
                let _ = fs::remove_file(&path);
                return Err(e);
            }
            st.created = true;
            st.dirty.insert(n, Arc::new(file));
            *st.refs.entry(n).or_insert(0) += 1;
            return Ok(ContentClaim {
                file: n,
                offset: 0,
                len: data.len() as u64,
            });
        }
        let (n, file, offset) = self.current_file(&mut st)?;
        let wrote = faults::step_at(
            Step::Write,
            || claim_path(&self.dir, n),
            || (&*file).write_all(data),
        );
        if let Err(e) = wrote {
            Self::retire_current(&self.dir, &mut st, n, file);
            return Err(e);
        }
        if let Some((_, _, len)) = st.current.as_mut() {
            *len += data.len() as u64;
        }
        st.dirty.insert(n, file);
        *st.refs.entry(n).or_insert(0) += 1;
        Ok(ContentClaim {
            file: n,
            offset,
            len: data.len() as u64,
        })
    }

    /// The shared claim file `n` failed an append: how much of it reached the file is
    /// unknown, so the file takes no more claims (the next gets a new file). Claims already
    /// in it stay readable; it goes once nothing refers to it.
    fn retire_current(dir: &Path, st: &mut State, n: u64, file: Arc<File>) {
        if st.current.as_ref().is_some_and(|(c, _, _)| *c == n) {
            st.current = None;
        }
        st.dirty.insert(n, file);
        st.open_for_append.remove(&n);
        Self::delete_if_unused(dir, st, n);
    }

    /// Appends the rest of `source` (read from its current position) as a new claim, copied
    /// in the kernel (`copy_file_range` through [`std::io::copy`]) without passing through
    /// memory of ours. `len_hint` (the file's size) chooses the claim file: 1 MiB or more
    /// gets its own. Not yet synced, and counted as its writer's hold, as for
    /// [`ContentRepository::write`].
    ///
    /// # Errors
    /// I/O errors reading `source` or writing the claim file.
    pub fn write_from(&self, source: &mut File, len_hint: u64) -> io::Result<ContentClaim> {
        let mut st = self.lock();
        if len_hint >= CLAIM_FILE_SIZE {
            let n = st.next_file;
            st.next_file += 1;
            // A file of its own, which nobody else knows yet: copy without the lock.
            drop(st);
            let path = claim_path(&self.dir, n);
            let mut file = faults::create(&path)?;
            let len = faults::step(Step::Write, &path, || io::copy(source, &mut file))
                .inspect_err(|_| {
                    let _ = fs::remove_file(&path);
                })?;
            let mut st = self.lock();
            st.created = true;
            st.dirty.insert(n, Arc::new(file));
            *st.refs.entry(n).or_insert(0) += 1;
            return Ok(ContentClaim {
                file: n,
                offset: 0,
                len,
            });
        }
        let (n, file, offset) = self.current_file(&mut st)?;
        let copied = faults::step_at(
            Step::Write,
            || claim_path(&self.dir, n),
            || io::copy(source, &mut &*file),
        );
        match copied {
            Ok(len) => {
                if let Some((_, _, end)) = st.current.as_mut() {
                    *end += len;
                }
                st.dirty.insert(n, file);
                *st.refs.entry(n).or_insert(0) += 1;
                Ok(ContentClaim {
                    file: n,
                    offset,
                    len,
                })
            }
            Err(e) => {
                Self::retire_current(&self.dir, &mut st, n, file);
                Err(e)
            }
        }
    }

    /// The shared claim file taking appends (a new one once the last is full): its number,
    /// handle and length so far.
    fn current_file(&self, st: &mut State) -> io::Result<(u64, Arc<File>, u64)> {
        if st
            .current
            .as_ref()
            .is_none_or(|(_, _, len)| *len >= CLAIM_FILE_SIZE)
        {
            if let Some((old, _, _)) = st.current.take() {
                st.open_for_append.remove(&old);
                Self::delete_if_unused(&self.dir, st, old);
            }
            let n = st.next_file;
            st.next_file += 1;
            let path = claim_path(&self.dir, n);
            let file = faults::step(Step::Create, &path, || {
                OpenOptions::new()
                    .create_new(true)
                    .append(true)
                    .read(true)
                    .open(&path)
            })?;
            st.created = true;
            st.open_for_append.insert(n);
            st.current = Some((n, Arc::new(file), 0));
        }
        let (n, file, len) = st.current.as_ref().expect("a current claim file");
        Ok((*n, Arc::clone(file), *len))
    }

    /// Copies a claim's bytes to the end of `out`: large claims in the kernel
    /// (`copy_file_range` through [`std::io::copy`]), small ones through one read.
    ///
    /// # Errors
    /// I/O errors, or a claim past the end of its file.
    pub fn copy_to(&self, claim: &ContentClaim, out: &mut File) -> io::Result<()> {
        if claim.len < COPY_IN_KERNEL_FROM {
            return out.write_all(&self.read(claim)?);
        }
        // A handle of its own: the copy moves its file position.
        let mut file = File::open(claim_path(&self.dir, claim.file))?;
        io::Seek::seek(&mut file, io::SeekFrom::Start(claim.offset))?;
        let copied = io::copy(&mut io::Read::take(file, claim.len), out)?;
        if copied < claim.len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "claim file {} ends before its claim ({copied} of {} bytes)",
                    claim.file, claim.len
                ),
            ));
        }
        Ok(())
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

    /// Syncs every claim file written since the last call, and the directory when files were
    /// created since (a new file's entry is durable only then): called by the journal's
    /// committer before it writes the frames that point to the content, and before a
    /// checkpoint.
    ///
    /// # Errors
    /// The first I/O error; the caller poisons the repository.
    pub fn sync(&self) -> io::Result<()> {
        let (dirty, created): (Vec<(u64, Arc<File>)>, bool) = {
            let mut st = self.lock();
            (st.dirty.drain().collect(), std::mem::take(&mut st.created))
        };
        let result = Self::sync_files(&self.dir, dirty);
        if created {
            // Only after the files: their entries must not name data still in flight. On an
            // error the flag comes back, so that the next sync covers them again.
            if let Err(e) = result.and_then(|()| super::sync_dir(&self.dir)) {
                self.lock().created = true;
                return Err(e);
            }
            return Ok(());
        }
        result
    }

    fn sync_files(dir: &Path, dirty: Vec<(u64, Arc<File>)>) -> io::Result<()> {
        let files: Vec<(PathBuf, Arc<File>)> = dirty
            .into_iter()
            .map(|(n, f)| (claim_path(dir, n), f))
            .collect();
        super::sync_together(&files)
    }

    /// Applies a commit's reference changes: +1 for each flow file sent on with a claim in
    /// the file, −1 for each flow file taken or dropped, and −1 for each of the writer's
    /// holds the commit releases (see the [module docs](self)). The changes are summed per
    /// file first, so their order does not matter; then files whose count reached zero and
    /// that take no more appends are deleted.
    pub fn adjust_refs(&self, changes: &[(u64, i64)]) {
        if changes.is_empty() {
            return;
        }
        let mut net: Vec<(u64, i64)> = changes.to_vec();
        net.sort_unstable_by_key(|&(file, _)| file);
        net.dedup_by(|later, first| {
            if later.0 == first.0 {
                first.1 += later.1;
                true
            } else {
                false
            }
        });
        let mut st = self.lock();
        for (file, delta) in net {
            if delta == 0 {
                continue;
            }
            let count = st.refs.entry(file).or_insert(0);
            let next = *count as i64 + delta;
            debug_assert!(next >= 0, "claim file {file}: count {count} {delta:+}");
            *count = next.max(0) as u64;
            if *count == 0 {
                Self::delete_if_unused(&self.dir, &mut st, file);
            }
        }
    }

    /// Releases the writer's holds on `claims` (written by a session that rolled back, or by
    /// a commit that failed): the claims are dropped, and their files go once nothing else
    /// refers to them.
    pub fn release_uncommitted(&self, claims: &[ContentClaim]) {
        let changes: Vec<(u64, i64)> = claims.iter().map(|c| (c.file, -1)).collect();
        self.adjust_refs(&changes);
    }

    /// The reference count of claim file `file` (committed flow files and uncommitted
    /// claims), for checks.
    pub fn refs_of(&self, file: u64) -> u64 {
        self.lock().refs.get(&file).copied().unwrap_or(0)
    }

    /// True when claim file `file` is on disk.
    pub fn file_exists(&self, file: u64) -> bool {
        claim_path(&self.dir, file).exists()
    }

    /// The numbers of the claim files on disk, for checks that nothing leaks.
    ///
    /// # Errors
    /// An I/O error listing the directory.
    pub fn files_on_disk(&self) -> io::Result<Vec<u64>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            if let Some(n) = entry?
                .file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".claim"))
                .and_then(|n| n.parse::<u64>().ok())
            {
                out.push(n);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    fn delete_if_unused(dir: &Path, st: &mut State, file: u64) {
        if st.open_for_append.contains(&file) || st.refs.get(&file).copied().unwrap_or(0) > 0 {
            return;
        }
        st.refs.remove(&file);
        st.readers.remove(&file);
        st.dirty.remove(&file);
        // A missing file is already what we want.
        let path = claim_path(dir, file);
        let _ = faults::step(Step::Remove, &path, || fs::remove_file(&path));
    }

    /// Number of claim files on disk that flow files refer to.
    pub fn referenced_files(&self) -> usize {
        self.lock().refs.values().filter(|c| **c > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A commit's changes for a session that wrote `new` and sent each on once.
    fn commit_new(repo: &ContentRepository, new: &[ContentClaim]) {
        let mut changes: Vec<(u64, i64)> = new.iter().map(|c| (c.file, 1)).collect();
        changes.extend(new.iter().map(|c| (c.file, -1)));
        repo.adjust_refs(&changes);
    }

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
        commit_new(&repo, &[a, b, big]);
        assert_eq!(repo.refs_of(big.file), 1);
        // Its one flow file dropped: the file goes.
        repo.adjust_refs(&[(big.file, -1)]);
        assert!(!claim_path(dir.path(), big.file).exists());
        // The shared file stays while it takes appends.
        repo.adjust_refs(&[(a.file, -1), (a.file, -1)]);
        assert!(claim_path(dir.path(), a.file).exists());
        drop(repo);
        // Recovery: only referenced files survive.
        let repo = ContentRepository::open(dir.path(), HashMap::new()).unwrap();
        assert!(!claim_path(dir.path(), a.file).exists());
        assert_eq!(repo.referenced_files(), 0);
    }

    /// A flow file passed on unchanged: −1 for its input before +1 for its output, in one
    /// commit. Its file (one of its own, or a full shared one) must stay.
    #[test]
    fn a_flow_file_passed_on_keeps_its_content_whatever_the_order_of_changes() {
        let dir = tempfile::tempdir().unwrap();
        let repo = ContentRepository::open(dir.path(), HashMap::new()).unwrap();
        let big = repo
            .write(&vec![1u8; CLAIM_FILE_SIZE as usize + 1])
            .unwrap();
        let small = repo.write(&vec![2u8; 600 << 10]).unwrap();
        // Fill the shared file so that it takes no more appends.
        let filler = repo.write(&vec![3u8; 500 << 10]).unwrap();
        let next = repo.write(b"next file").unwrap();
        assert_ne!(next.file, small.file, "the shared file rolled over");
        commit_new(&repo, &[big, small, filler, next]);
        repo.adjust_refs(&[(filler.file, -1)]);
        for c in [big, small] {
            // UpdateAttribute's commit: the input's −1 first, then the output's +1.
            repo.adjust_refs(&[(c.file, -1), (c.file, 1)]);
            assert!(repo.file_exists(c.file), "claim file {} deleted", c.file);
            assert_eq!(repo.read(&c).unwrap().len() as u64, c.len);
        }
    }

    /// Uncommitted content keeps its shared file alive: through the file's rollover, and
    /// through another session's rollback of its own claims in the same file.
    #[test]
    fn uncommitted_claims_keep_their_file_through_rollover_and_others_rollbacks() {
        let dir = tempfile::tempdir().unwrap();
        let repo = ContentRepository::open(dir.path(), HashMap::new()).unwrap();
        let mine = repo.write(b"uncommitted").unwrap();
        let theirs = repo
            .write(&vec![9u8; (CLAIM_FILE_SIZE - 11) as usize])
            .unwrap();
        assert_eq!(mine.file, theirs.file);
        // The next write rolls the file over: nothing committed refers to it yet.
        let later = repo.write(b"in the next file").unwrap();
        assert_ne!(later.file, mine.file);
        assert!(repo.file_exists(mine.file));
        // The other session rolls back.
        repo.release_uncommitted(&[theirs]);
        assert!(repo.file_exists(mine.file));
        assert_eq!(repo.read(&mine).unwrap(), b"uncommitted");
        // Mine commits, then its flow file is dropped: now the file goes.
        commit_new(&repo, &[mine]);
        assert!(repo.file_exists(mine.file));
        repo.adjust_refs(&[(mine.file, -1)]);
        assert!(!repo.file_exists(mine.file));
    }

    #[test]
    fn files_copy_in_and_out_of_claims_at_their_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let repo = ContentRepository::open(&dir.path().join("content"), HashMap::new()).unwrap();
        let small: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let large: Vec<u8> = (0..(CLAIM_FILE_SIZE as u32 + 7))
            .map(|i| (i % 253) as u8)
            .collect();
        let before = repo.write(b"first").unwrap();
        let mut claims = Vec::new();
        for data in [&small, &large] {
            let src = dir.path().join("src");
            fs::write(&src, data).unwrap();
            let mut f = File::open(&src).unwrap();
            claims.push(repo.write_from(&mut f, data.len() as u64).unwrap());
        }
        // The small one shares the file after "first"; the large one has its own.
        assert_eq!((claims[0].file, claims[0].offset), (before.file, 5));
        assert_ne!(claims[1].file, before.file);
        repo.sync().unwrap();
        for (claim, data) in claims.iter().zip([&small, &large]) {
            assert_eq!(claim.len, data.len() as u64);
            let out_path = dir.path().join("out");
            let mut out = File::create(&out_path).unwrap();
            out.write_all(b"head:").unwrap();
            repo.copy_to(claim, &mut out).unwrap();
            let got = fs::read(&out_path).unwrap();
            assert_eq!(&got[..5], b"head:");
            assert_eq!(&got[5..], &data[..]);
        }
        // A claim past the end of its file is an error, not a short copy.
        let bad = ContentClaim {
            len: claims[1].len + 10,
            ..claims[1]
        };
        let mut out = File::create(dir.path().join("bad")).unwrap();
        assert!(repo.copy_to(&bad, &mut out).is_err());
    }

    /// A model of reference counting: sessions write claims, commit (sending each new claim
    /// and some live flow files' claims on, dropping others) or roll back, interleaved at
    /// random, with shared files rolling over. Whatever refers to a claim, committed or not,
    /// finds it readable; when nothing refers to a file and it takes no appends, it is gone.
    mod model {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Step {
            /// Session `s` writes a claim of about `size` bytes.
            Write { s: usize, size: usize },
            /// Session `s` commits: its claims become flow files; it takes the live flow
            /// files picked by `take` and passes on those picked by `keep` (clones when
            /// `clone`).
            Commit {
                s: usize,
                take: u8,
                keep: u8,
                clone: bool,
            },
            /// Session `s` rolls back.
            Rollback { s: usize },
        }

        fn step() -> impl Strategy<Value = Step> {
            let size = prop_oneof![
                Just(0usize),
                Just(1),
                1usize..4096,
                Just(600 << 10),
                Just((CLAIM_FILE_SIZE - 1) as usize),
                Just(CLAIM_FILE_SIZE as usize),
                Just(CLAIM_FILE_SIZE as usize + 1),
            ];
            prop_oneof![
                3 => (0..3usize, size).prop_map(|(s, size)| Step::Write { s, size }),
                2 => (0..3usize, any::<u8>(), any::<u8>(), any::<bool>())
                    .prop_map(|(s, take, keep, clone)| Step::Commit { s, take, keep, clone }),
                1 => (0..3usize).prop_map(|s| Step::Rollback { s }),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]
            #[test]
            fn every_claim_referred_to_stays_readable(steps in proptest::collection::vec(step(), 1..40)) {
                let dir = tempfile::tempdir().unwrap();
                let repo = ContentRepository::open(dir.path(), HashMap::new()).unwrap();
                // Each claim's expected bytes, by (file, offset, length).
                let mut bytes: HashMap<(u64, u64, u64), Vec<u8>> = HashMap::new();
                let mut sessions: Vec<Vec<ContentClaim>> = vec![Vec::new(); 3];
                // Committed flow files' claims.
                let mut live: Vec<ContentClaim> = Vec::new();
                let mut fill = 0u8;
                for step in steps {
                    match step {
                        Step::Write { s, size } => {
                            fill = fill.wrapping_add(1);
                            let data = vec![fill; size];
                            let c = repo.write(&data).unwrap();
                            bytes.insert((c.file, c.offset, c.len), data);
                            sessions[s].push(c);
                        }
                        Step::Commit { s, take, keep, clone } => {
                            let new = std::mem::take(&mut sessions[s]);
                            let mut changes = Vec::new();
                            // The writer's holds end; each new claim becomes a flow file.
                            for c in &new {
                                changes.push((c.file, -1));
                                changes.push((c.file, 1));
                            }
                            let mut next_live = Vec::new();
                            for (i, c) in live.drain(..).enumerate() {
                                let picked = |mask: u8| mask & (1 << (i % 8)) != 0;
                                if !picked(take) {
                                    next_live.push(c);
                                    continue;
                                }
                                changes.push((c.file, -1));
                                if picked(keep) {
                                    changes.push((c.file, 1));
                                    next_live.push(c);
                                    if clone {
                                        changes.push((c.file, 1));
                                        next_live.push(c);
                                    }
                                }
                            }
                            next_live.extend(new);
                            live = next_live;
                            repo.adjust_refs(&changes);
                        }
                        Step::Rollback { s } => {
                            repo.release_uncommitted(&std::mem::take(&mut sessions[s]));
                        }
                    }
                    for c in live.iter().chain(sessions.iter().flatten()) {
                        let got = repo.read(c);
                        prop_assert!(got.is_ok(), "claim {:?} unreadable: {:?}", c, got.err());
                        prop_assert_eq!(&got.unwrap(), &bytes[&(c.file, c.offset, c.len)]);
                    }
                }
                // Everything dropped: only the file taking appends may stay.
                let mut changes: Vec<(u64, i64)> = live.iter().map(|c| (c.file, -1)).collect();
                changes.extend(sessions.iter().flatten().map(|c| (c.file, -1)));
                repo.adjust_refs(&changes);
                let left = repo.files_on_disk().unwrap();
                prop_assert!(left.len() <= 1, "files left: {:?}", left);
                if let Some(f) = left.first() {
                    prop_assert!(repo.lock().open_for_append.contains(f));
                }
            }
        }
    }

    /// A full disk fails an append half way: the shared file takes no more claims, and the
    /// claims already in it read back intact.
    #[test]
    fn a_failed_append_retires_the_shared_file() {
        let mount = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(mount.path())
            .status();
        if !status.is_ok_and(|s| s.success()) {
            eprintln!("skipped: cannot mount a small tmpfs (needs root)");
            return;
        }
        struct Unmount<'a>(&'a Path);
        impl Drop for Unmount<'_> {
            fn drop(&mut self) {
                let _ = std::process::Command::new("umount").arg(self.0).status();
            }
        }
        let _unmount = Unmount(mount.path());
        let repo = ContentRepository::open(mount.path(), HashMap::new()).unwrap();
        let first = repo.write(b"first").unwrap();
        let err = repo.write(&vec![5u8; 200 << 10]);
        assert!(err.is_err(), "the disk should be full");
        {
            let st = repo.lock();
            assert!(st.current.is_none(), "the failed file still takes appends");
            assert!(!st.open_for_append.contains(&first.file));
        }
        // The half-written append stays in the retired file; the next claim (if the disk
        // has room for it) goes to a new file, at offset 0.
        let after = repo.write(b"after");
        if let Ok(after) = after {
            assert_ne!(after.file, first.file, "the failed file took another claim");
            assert_eq!(after.offset, 0);
            assert_eq!(repo.read(&after).unwrap(), b"after");
        }
        assert_eq!(repo.read(&first).unwrap(), b"first");
    }
}
