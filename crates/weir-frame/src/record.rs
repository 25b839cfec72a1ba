//! Record frames, for files that grow by appending (the flow-file repository's journal);
//! each record is one frame, little-endian:
//!
//! ```text
//! length u32 | transaction id u64 | header CRC32C u32 | payload CRC32C u32 | payload
//! ```
//!
//! The header's checksum covers the length and the transaction id, so a damaged length is
//! never taken for a frame that runs past the end (a torn tail); the payload's covers the
//! payload.

use std::path::Path;

/// Bytes before the payload.
pub const HEADER: usize = 20;

/// Appends one frame to `out`.
pub fn encode(out: &mut Vec<u8>, txn: u64, payload: &[u8]) {
    let len = (payload.len() as u32).to_le_bytes();
    let txn = txn.to_le_bytes();
    let header_crc = crc32c::crc32c_append(crc32c::crc32c(&len), &txn);
    out.extend_from_slice(&len);
    out.extend_from_slice(&txn);
    out.extend_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
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

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// Scans `bytes` (the whole journal `file`).
///
/// A torn tail is what a write cut short by a crash leaves at the end of an append-only file,
/// and the scan stops before it:
/// - fewer bytes than a header at the end;
/// - a header whose checksum fails with nothing but NUL bytes after it (a header that
///   straddles the last sector written, or a file extended with NULs before the data came);
/// - a good header whose payload runs past the end of the file;
/// - a good header whose payload fails its checksum with nothing but NUL bytes after it.
///
/// Anything else that fails is [`Corrupt`]: a damaged length or transaction id anywhere, or
/// a damaged payload with data after it, refuses to start rather than dropping the
/// acknowledged frames that follow.
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
        let len = u32_at(bytes, pos) as usize;
        let txn = u64::from_le_bytes(bytes[pos + 4..pos + 12].try_into().expect("8 bytes"));
        let header_crc = u32_at(bytes, pos + 12);
        let payload_crc = u32_at(bytes, pos + 16);
        let actual = crc32c::crc32c(&bytes[pos..pos + 12]);
        if actual != header_crc {
            if zeros_from(pos + HEADER) {
                break; // the last header, torn, or NUL fill
            }
            return Err(corrupt(
                pos,
                format!(
                    "header checksum {header_crc:#010x} does not match {actual:#010x} (a damaged length or transaction id)"
                ),
            ));
        }
        let end = pos + HEADER + len;
        if end > bytes.len() {
            break; // a good header whose payload never fully arrived: torn
        }
        let payload = &bytes[pos + HEADER..end];
        let actual = crc32c::crc32c(payload);
        if actual != payload_crc {
            if zeros_from(end) {
                break; // the last frame, torn
            }
            return Err(corrupt(
                pos,
                format!("payload checksum {payload_crc:#010x} does not match {actual:#010x}"),
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
        // A few NULs, fewer than a header.
        let mut short_nul = full.clone();
        short_nul.extend_from_slice(&[0u8; 5]);
        assert_eq!(scan(Path::new("j"), &short_nul, 0).unwrap().frames.len(), 3);
        // The last frame's payload zeroed (the pages never reached the disk).
        let mut zeroed = full.clone();
        for b in &mut zeroed[two + HEADER..] {
            *b = 0;
        }
        assert_eq!(scan(Path::new("j"), &zeroed, 0).unwrap().frames.len(), 2);
        // The last frame's header half written: its second half and the payload NUL.
        let mut half = full.clone();
        for b in &mut half[two + 10..] {
            *b = 0;
        }
        assert_eq!(scan(Path::new("j"), &half, 0).unwrap().frames.len(), 2);
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

    /// Every bit of every length and transaction id, flipped in turn: each is refused,
    /// never taken for a torn tail that drops the frames after it.
    #[test]
    fn a_flipped_bit_in_any_header_is_corruption_not_a_torn_tail() {
        let bytes = journal(4);
        let starts: Vec<usize> = (0..4).map(|n| journal(n).len()).collect();
        for &start in &starts[..3] {
            for byte in start..start + 12 {
                for bit in 0..8 {
                    let mut damaged = bytes.clone();
                    damaged[byte] ^= 1 << bit;
                    let e = scan(Path::new("j"), &damaged, 0)
                        .expect_err(&format!("byte {byte} bit {bit} was accepted"));
                    assert_eq!(e.offset, start as u64);
                }
            }
        }
    }
}
