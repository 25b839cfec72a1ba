//! Word count with the Pipeline API: the lines of text files in, `word<TAB>count` lines out.
//!
//! ```text
//! cargo run --release --example wordcount -- data/sample target/example-counts.tsv
//! ```
//!
//! The same job as `weir run wordcount`, written out so you can change it.

use std::process::ExitCode;

use weir::aggregate::KeyCounter;
use weir::prelude::*;
use weir::sources::files::TextBlock;
use weir_cli::jobs::wordcount::{Word, count_words};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(input), Some(output)) = (args.next(), args.next()) else {
        eprintln!("usage: wordcount INPUT OUTPUT   (INPUT: a text file, a directory or a glob)");
        return ExitCode::from(2);
    };
    // The files as blocks of whole lines, each core reading its share of the bytes.
    let source = match sources::files::text_blocks(&input) {
        Ok(source) => source,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };

    let p = Pipeline::new();
    p.read_from(source)
        // Count the lowercase words of each block into the core's own table (`Word` stores
        // short words inline), then combine the cores' counts by word.
        .count_keys(|block: &TextBlock, counts: &mut KeyCounter<Word>| {
            count_words(block.as_str(), counts);
        })
        // Most frequent first.
        .sort_by(|a: &(Word, u64), b: &(Word, u64)| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)))
        .write_to(sinks::files::text_with(
            &output,
            |(word, count): &(Word, u64), out: &mut Vec<u8>| {
                out.extend_from_slice(format!("{word}\t{count}\n").as_bytes())
            },
        ));

    println!("{}", p.explain().expect("the pipeline is valid"));
    match p.run() {
        Ok(()) => {
            println!("wrote {output}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
