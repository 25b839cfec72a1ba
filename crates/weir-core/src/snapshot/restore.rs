//! Finding the snapshot to resume from, and handing its entries to the new instances.

use std::path::PathBuf;

use weir_partition::Partitioner;

use super::format::{Manifest, SnapshotError, decode_part};
use super::{SnapshotEntry, SnapshotStore};

/// The newest complete, readable snapshot of a job, decoded.
#[derive(Debug)]
pub struct Restored {
    /// Its manifest.
    pub manifest: Manifest,
    /// Every part's entries, `[vertex][instance at snapshot time]`.
    pub entries: Vec<Vec<Vec<SnapshotEntry>>>,
    /// The id the next snapshot takes: above every snapshot folder present, complete or not.
    pub next_id: u64,
}

impl Restored {
    /// Moves every entry to the instances that restore it, when vertex `v` now runs
    /// `parallelism[v]` instances: `[slot]` in vertex order, instances in order. Keyed entries
    /// move to their partition's owner; unkeyed ones are copied to every instance. Cost: one
    /// pass; only unkeyed entries (positions, watermarks) are copied.
    pub fn take_entries(&mut self, parallelism: &[usize]) -> Vec<Vec<SnapshotEntry>> {
        let mut out = Vec::new();
        for (v, &p) in parallelism.iter().enumerate() {
            let p = p.max(1);
            let owners = Partitioner::default().owner_table(p);
            let first = out.len();
            out.extend((0..p).map(|_| Vec::new()));
            let parts = self
                .entries
                .get_mut(v)
                .map(std::mem::take)
                .unwrap_or_default();
            for e in parts.into_iter().flatten() {
                match e.partition {
                    Some(partition) => {
                        if let Some(&owner) = owners.get(partition as usize) {
                            out[first + owner as usize].push(e);
                        }
                    }
                    None => {
                        for i in 1..p {
                            out[first + i].push(e.clone());
                        }
                        out[first].push(e);
                    }
                }
            }
        }
        out
    }
}

/// The newest snapshot of `job` that is complete and whose files all check out, taken of a
/// DAG whose vertices are `vertices` (names in DAG order). A damaged snapshot is skipped with
/// a warning naming the file, and the one before it is tried.
///
/// # Errors
/// The store cannot be read, or the usable snapshot was taken of another DAG
/// ([`SnapshotError::Mismatch`], naming the vertex).
pub fn load_latest(
    store: &dyn SnapshotStore,
    job: &str,
    vertices: &[&str],
) -> Result<Option<Restored>, SnapshotError> {
    let ids = store.ids(job)?;
    let next_id = ids.first().map_or(1, |newest| newest + 1);
    for id in ids {
        let manifest_path = store.location(job, id, "manifest");
        let Some(bytes) = store.read_manifest(job, id)? else {
            continue;
        };
        let manifest = match Manifest::decode(&manifest_path, &bytes) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(%e, "skipping a damaged snapshot; trying the one before it");
                continue;
            }
        };
        check_dag(&manifest, vertices, store.location(job, id, ""))?;
        match read_parts(store, job, &manifest) {
            Ok(entries) => {
                return Ok(Some(Restored {
                    manifest,
                    entries,
                    next_id,
                }));
            }
            Err(e @ SnapshotError::Corrupt { .. }) => {
                tracing::warn!(%e, "skipping a damaged snapshot; trying the one before it");
            }
            Err(SnapshotError::Io { path, source })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                tracing::warn!(path = %path.display(), "skipping a snapshot with a missing part; trying the one before it");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

fn check_dag(manifest: &Manifest, vertices: &[&str], path: PathBuf) -> Result<(), SnapshotError> {
    let mismatch = |vertex: &str, reason: String| SnapshotError::Mismatch {
        path: path.clone(),
        vertex: vertex.to_string(),
        reason,
    };
    for (i, name) in vertices.iter().enumerate() {
        match manifest.vertices.get(i) {
            Some(v) if v.name == *name => {}
            Some(v) => {
                return Err(mismatch(
                    name,
                    format!("the snapshot has '{}' in its place", v.name),
                ));
            }
            None => return Err(mismatch(name, "the snapshot has no such vertex".into())),
        }
    }
    if let Some(extra) = manifest.vertices.get(vertices.len()) {
        return Err(mismatch(
            &extra.name,
            "the job has no such vertex any more".into(),
        ));
    }
    Ok(())
}

fn read_parts(
    store: &dyn SnapshotStore,
    job: &str,
    manifest: &Manifest,
) -> Result<Vec<Vec<Vec<SnapshotEntry>>>, SnapshotError> {
    // Parts are read and decoded in parallel, one thread per part up to the core count:
    // decoding a large keyed state is the bulk of a restore.
    let parts: Vec<(usize, &super::format::PartInfo)> = manifest
        .vertices
        .iter()
        .enumerate()
        .flat_map(|(v, vertex)| vertex.parts.iter().map(move |p| (v, p)))
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = parts.len().div_ceil(threads).max(1);
    let decoded: Vec<Result<Vec<SnapshotEntry>, SnapshotError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .chunks(chunk)
            .map(|group| {
                scope.spawn(move || {
                    group
                        .iter()
                        .map(|(_, part)| read_part(store, job, manifest.id, part))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a part decoder does not panic"))
            .collect()
    });
    let mut out: Vec<Vec<Vec<SnapshotEntry>>> = manifest
        .vertices
        .iter()
        .map(|v| vec![Vec::new(); v.parallelism])
        .collect();
    for ((v, part), entries) in parts.into_iter().zip(decoded) {
        let entries = entries?;
        if let Some(slot) = out[v].get_mut(part.instance) {
            *slot = entries;
        }
    }
    Ok(out)
}

fn read_part(
    store: &dyn SnapshotStore,
    job: &str,
    id: u64,
    part: &super::format::PartInfo,
) -> Result<Vec<SnapshotEntry>, SnapshotError> {
    let (path, bytes) = read_sized_part(store, job, id, part)?;
    decode_part(&path, &bytes)
}

/// Part `part` of snapshot `id` and where it lives, refused unless it has the size the
/// manifest gives.
fn read_sized_part(
    store: &dyn SnapshotStore,
    job: &str,
    id: u64,
    part: &super::format::PartInfo,
) -> Result<(std::path::PathBuf, Vec<u8>), SnapshotError> {
    let bytes = store.read_part(job, id, &part.file)?;
    let path = store.location(job, id, &part.file);
    if bytes.len() as u64 != part.bytes {
        return Err(SnapshotError::Corrupt {
            path,
            reason: format!("{} bytes, the manifest says {}", bytes.len(), part.bytes),
        });
    }
    Ok((path, bytes))
}

/// Checks snapshot `id` of `job` without decoding its entries: its manifest decodes, and
/// every part it lists is there, of the size it says, with a good checksum. `Ok(None)` for
/// a snapshot without a manifest (incomplete). Cost: every part read once.
///
/// # Errors
/// The first problem found: [`SnapshotError::Corrupt`] or [`SnapshotError::Io`] naming the
/// file.
pub fn verify(
    store: &dyn SnapshotStore,
    job: &str,
    id: u64,
) -> Result<Option<Manifest>, SnapshotError> {
    let Some(bytes) = store.read_manifest(job, id)? else {
        return Ok(None);
    };
    let manifest = Manifest::decode(&store.location(job, id, "manifest"), &bytes)?;
    for part in manifest.vertices.iter().flat_map(|v| &v.parts) {
        let (path, bytes) = read_sized_part(store, job, id, part)?;
        super::format::check_part(&path, &bytes)?;
    }
    Ok(Some(manifest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::format::{PartInfo, VertexInfo, encode_part};
    use crate::snapshot::{Guarantee, LocalDirStore};

    /// Publishes snapshot `id` of a one-vertex job whose single part holds `value`.
    fn publish(store: &LocalDirStore, id: u64, value: u8) {
        let part = encode_part(&[SnapshotEntry {
            partition: None,
            key: b"k".to_vec(),
            value: vec![value],
        }]);
        store.write_part("j", id, "p0", &part).unwrap();
        let manifest = Manifest {
            job: "j".into(),
            id,
            taken_at_ms: 0,
            duration_ms: 0,
            alignment_ms: 0,
            terminal: false,
            guarantee: Guarantee::ExactlyOnce,
            savepoint: false,
            vertices: vec![VertexInfo {
                name: "v".into(),
                parallelism: 1,
                parts: vec![PartInfo {
                    instance: 0,
                    file: "p0".into(),
                    bytes: part.len() as u64,
                    entries: 1,
                }],
            }],
        };
        store.publish("j", id, &manifest.encode()).unwrap();
    }

    fn damage(path: &std::path::Path, how: &str) {
        let mut bytes = std::fs::read(path).unwrap();
        match how {
            "flip" => {
                let last = bytes.len() - 1;
                bytes[last] ^= 0x01;
            }
            _ => bytes.truncate(bytes.len() / 2),
        }
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_damaged_newest_snapshot_falls_back_to_the_one_before() {
        for (file, how) in [
            ("p0", "flip"),
            ("p0", "truncate"),
            ("manifest", "flip"),
            ("manifest", "truncate"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let store = LocalDirStore::new(dir.path());
            publish(&store, 1, 10);
            publish(&store, 2, 20);
            damage(&store.location("j", 2, file), how);
            let mut restored = load_latest(&store, "j", &["v"]).unwrap().unwrap();
            assert_eq!(restored.manifest.id, 1, "{file} {how}");
            assert_eq!(restored.take_entries(&[1])[0][0].value, vec![10]);
            assert_eq!(
                restored.next_id, 3,
                "new snapshots never reuse a damaged one's id"
            );
        }
    }

    #[test]
    fn a_snapshot_of_another_dag_is_refused_naming_the_vertex() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalDirStore::new(dir.path());
        publish(&store, 1, 10);
        let err = load_latest(&store, "j", &["w"]).unwrap_err();
        assert!(err.to_string().contains("vertex 'w'"), "{err}");
        let err = load_latest(&store, "j", &["v", "extra"]).unwrap_err();
        assert!(err.to_string().contains("'extra'"), "{err}");
    }
}
