//! A file sink on a full disk: the job fails with the file named, nothing is left under the
//! final name, the temporary file is removed, and no thread is left writing.
//!
//! Needs root to mount a 1 MiB tmpfs; without it the test says so and passes.

use std::path::{Path, PathBuf};
use std::process::Command;

use weir::prelude::*;

/// A 1 MiB tmpfs mounted for the test, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount() -> Option<SmallDisk> {
        let dir = tempfile::tempdir().ok()?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(dir.path())
            .status()
            .ok()?;
        status.success().then_some(SmallDisk { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

#[test]
fn a_full_disk_fails_the_job_naming_the_file_and_leaves_nothing_behind() {
    let Some(disk) = SmallDisk::mount() else {
        eprintln!("skipped: cannot mount a tmpfs (needs root)");
        return;
    };
    let out = disk.path().join("lines.txt");
    for sink in [
        sinks::files::text::<u64>(&out),
        sinks::json::lines::<u64>(&out),
    ] {
        let p = Pipeline::new();
        // About 8 MB of text into a 1 MiB disk.
        p.read_from(sources::generator::sequence(1_000_000))
            .write_to(sink);
        let err = p.run().expect_err("the disk is full");
        let text = err.to_string();
        assert!(text.contains("lines.txt.tmp"), "{text}");
        assert!(
            text.contains("No space left on device"),
            "the cause is the full disk: {text}"
        );
        assert_eq!(
            entries(disk.path()),
            Vec::<PathBuf>::new(),
            "neither the output nor its temporary file may remain"
        );
    }
}
