//! The NEXMark generator alone: the baseline of the NEXMark query benchmarks.
//!
//! ```text
//! CARGO_TARGET_DIR=target cargo bench -p weir-nexmark --bench generator
//! ```
//!
//! One thread, so the throughput is per core. Three scenarios of 1 M events (default
//! configuration: 10 M events/s of event time, seed 0), each reported in events/s:
//!
//! - `events`: [`Generator::event`] through the iterator, each event dropped after a
//!   `black_box`: the cost of making events;
//! - `reader`: the same through the batch source's reader, in batches of 1024 as the engine
//!   takes them;
//! - `json`: each event also serialised as a JSON Lines line into a reused buffer, as
//!   `weir nexmark generate` does (the file write excluded).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use weir::ProcessorContext;
use weir::sources::{Emitter, SourceReader};
use weir_nexmark::generator::{Generator, GeneratorConfig};
use weir_nexmark::source::GeneratorReader;

const EVENTS: u64 = 1_000_000;

fn generator() -> Generator {
    Generator::new(GeneratorConfig {
        count: Some(EVENTS),
        ..Default::default()
    })
    .expect("the default configuration is valid")
}

fn bench(c: &mut Criterion) {
    let g = generator();
    let mut group = c.benchmark_group("nexmark_generator");
    group.throughput(Throughput::Elements(EVENTS));
    group.sample_size(10);

    group.bench_function("events", |b| {
        b.iter(|| {
            for e in g.iter() {
                black_box(e);
            }
        })
    });

    group.bench_function("reader", |b| {
        b.iter(|| {
            let mut reader = GeneratorReader::new(g.clone());
            reader
                .open(&ProcessorContext::new("bench", 0, 1, 0))
                .expect("open");
            let mut batch = Vec::with_capacity(1024);
            loop {
                let done = reader
                    .read(&mut Emitter::new(&mut batch, 1024))
                    .expect("read");
                black_box(&batch);
                batch.clear();
                if done {
                    break;
                }
            }
        })
    });

    group.bench_function("json", |b| {
        let mut buf = Vec::with_capacity(1 << 20);
        b.iter(|| {
            for e in g.iter() {
                e.write_json_line(&mut buf);
                if buf.len() > (1 << 20) - 4096 {
                    black_box(&buf);
                    buf.clear();
                }
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
