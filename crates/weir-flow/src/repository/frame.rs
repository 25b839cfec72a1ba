//! Journal frames: `length u32 | CRC32C u32 | transaction id u64 | payload`, little-endian.
//! The CRC covers the transaction id and the payload.

use std::path::Path;

/// Bytes before the payload.
pub const HEADER: usize = 16;

/// Appends one frame to `out`.
pub fn encode(out: &mut Vec<u8>, txn: u64, payload: &[u8]) {
    let mut crc = crc32c::crc32c(&txn.to_le_bytes());
    crc = crc32c::crc32c_append(crc, payload);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&txn.to_le_bytes());
    out.extend_from_slice(payload);
}

/// What a scan of a journal found.
#[derive(Debug)]
pub struct Scan<'a> {
    /// Every good frame: (offset, transaction id, payload).
    pub frames: Vec<(u64, u64, &'a [u8])>,
    /// Where the good frames end; bytes after it are a torn or NUL-filled tail to truncate.
    pub valid_len: u64,
}

/// A frame that is bad where no torn write can explain it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt journal frame in {file} at offset {offset}: {reason}")]
pub struct Corrupt {
    /// The journal file.
    pub file: String,
    /// Byte offset of the bad frame.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

/// Scans `bytes` (the whole journal `file`).
///
/// A tail that ends mid-frame, a last frame whose checksum fails with nothing but zeros after
/// it, or a run of NUL bytes to the end (a power loss on a file system that extended the file
/// before writing it) is a torn tail: the scan stops before it. Anything else that fails, with
/// data after it, is [`Corrupt`].
///
/// # Errors
/// [`Corrupt`] naming the file and offset.
pub fn scan<'a>(file: &Path, bytes: &'a [u8], after_txn: u64) -> Result<Scan<'a>, Corrupt> {
    let corrupt = |offset: usize, reason: String| Corrupt {
        file: file.display().to_string(),
        offset: offset as u64,
        reason,
    };
    let zeros_from = |at: usize| {
        bytes
            .get(at..)
            .is_none_or(|rest| rest.iter().all(|b| *b == 0))
    };
    let mut frames = Vec::new();
    let mut pos = 0usize;
    let mut last_txn = after_txn;
    while pos < bytes.len() {
        if bytes.len() - pos < HEADER {
            break; // a header cut short: torn
        }
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().expect("4 bytes"));
        let txn = u64::from_le_bytes(bytes[pos + 8..pos + 16].try_into().expect("8 bytes"));
        let end = pos + HEADER + len;
        if end > bytes.len() {
            break; // runs past the end: torn
        }
        let payload = &bytes[pos + HEADER..end];
        let mut actual = crc32c::crc32c(&txn.to_le_bytes());
        actual = crc32c::crc32c_append(actual, payload);
        if actual != crc {
            if zeros_from(pos) || zeros_from(end) {
                break; // the last frame, torn, or NUL fill
            }
            return Err(corrupt(
                pos,
                format!("checksum {crc:#010x} does not match {actual:#010x}"),
            ));
        }
        if txn <= last_txn {
            return Err(corrupt(pos, format!("transaction {txn} after {last_txn}")));
        }
        last_txn = txn;
        frames.push((pos as u64, txn, payload));
        pos = end;
    }
    Ok(Scan {
        frames,
        valid_len: pos as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(n: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for t in 1..=n {
            encode(&mut out, t, format!("payload {t}").as_bytes());
        }
        out
    }

    #[test]
    fn good_frames_scan() {
        let bytes = journal(3);
        let s = scan(Path::new("j"), &bytes, 0).unwrap();
        assert_eq!(s.frames.len(), 3);
        assert_eq!(s.valid_len, bytes.len() as u64);
        assert_eq!(s.frames[2].2, b"payload 3");
    }

    #[test]
    fn torn_and_nul_tails_stop_the_scan() {
        let full = journal(3);
        let two = journal(2).len();
        for cut in two + 1..full.len() {
            let s = scan(Path::new("j"), &full[..cut], 0).unwrap();
            assert_eq!(s.frames.len(), 2, "cut at {cut}");
            assert_eq!(s.valid_len, two as u64);
        }
        let mut nul = full.clone();
        nul.extend_from_slice(&[0u8; 28]);
        let s = scan(Path::new("j"), &nul, 0).unwrap();
        assert_eq!((s.frames.len(), s.valid_len), (3, full.len() as u64));
        // The last frame's payload zeroed (the pages never reached the disk).
        let mut zeroed = full.clone();
        for b in &mut zeroed[two + HEADER..] {
            *b = 0;
        }
        assert_eq!(scan(Path::new("j"), &zeroed, 0).unwrap().frames.len(), 2);
    }

    #[test]
    fn a_bad_frame_in_the_middle_is_corruption() {
        let mut bytes = journal(3);
        let first = journal(1).len();
        bytes[first + HEADER + 2] ^= 0xff;
        let e = scan(Path::new("journal-1"), &bytes, 0).unwrap_err();
        assert_eq!(e.offset, first as u64);
        assert!(e.to_string().contains("journal-1"), "{e}");
    }
}
