//! Generated sources: numbers made on the fly, split across instances.
//!
//! ```
//! use weir::prelude::*;
//!
//! let p = Pipeline::new();
//! let (sink, out) = sinks::collection::list();
//! p.read_from(sources::generator::sequence(1000)).filter(|x| x % 100 == 0).write_to(sink);
//! p.run().unwrap();
//! let mut got = out.take();
//! got.sort();
//! assert_eq!(got, [0, 100, 200, 300, 400, 500, 600, 700, 800, 900]);
//! ```

use weir_core::{BoxError, ProcessorContext};

use crate::sources::{BatchSource, Emitter, SourceReader};

/// How many numbers a reader emits per `read` call at most.
const STEP: u64 = 4096;

/// The numbers `0..count`, each exactly once. Runs one instance per worker; instance `i` of
/// `n` emits the contiguous share `count*i/n .. count*(i+1)/n`, in order.
///
/// Cost: no allocation; a few instructions per number.
pub fn sequence(count: u64) -> BatchSource<u64> {
    BatchSource::new("sequence", None, move |_: &ProcessorContext| {
        SequenceReader {
            next: 0,
            end: count,
            count,
        }
    })
}

struct SequenceReader {
    next: u64,
    end: u64,
    count: u64,
}

impl SourceReader for SequenceReader {
    type Item = u64;

    fn open(&mut self, ctx: &ProcessorContext) -> Result<(), BoxError> {
        let (i, n) = (
            ctx.global_index() as u128,
            ctx.total_parallelism().max(1) as u128,
        );
        let count = u128::from(self.count);
        self.next = (count * i / n) as u64;
        self.end = (count * (i + 1) / n) as u64;
        Ok(())
    }

    #[inline]
    fn read(&mut self, out: &mut Emitter<'_, u64>) -> Result<bool, BoxError> {
        let stop = self
            .end
            .min(self.next.saturating_add(STEP.min(out.room() as u64)));
        out.extend(self.next..stop);
        self.next = stop;
        Ok(self.next >= self.end)
    }

    /// The next number, 8 bytes.
    fn position(&self) -> Option<Vec<u8>> {
        Some(self.next.to_le_bytes().to_vec())
    }

    fn seek(&mut self, position: &[u8]) -> Result<(), BoxError> {
        let next = decode_u64(position)?;
        if next > self.end {
            return Err(format!("number {next} is past this instance's share").into());
        }
        self.next = next;
        Ok(())
    }
}

/// Decodes the 8-byte position of a counting reader.
pub(crate) fn decode_u64(position: &[u8]) -> Result<u64, BoxError> {
    <[u8; 8]>::try_from(position)
        .map(u64::from_le_bytes)
        .map_err(|_| "a damaged read position".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::files::testing::run;

    #[test]
    fn instances_split_the_range_exactly() {
        for n in 1..=4 {
            let mut all = Vec::new();
            for i in 0..n {
                let reader = SequenceReader {
                    next: 0,
                    end: 10_001,
                    count: 10_001,
                };
                all.extend(run(reader, i, n).0);
            }
            assert_eq!(all, (0..10_001).collect::<Vec<_>>(), "{n} instances");
        }
    }
}
