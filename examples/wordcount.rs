//! Word count with the Pipeline API: the lines of text files in, `word<TAB>count` lines out.
//!
//! ```text
//! cargo run --release --example wordcount -- data/sample target/example-counts.tsv
//! ```
//!
//! The same job as `weir run wordcount`, written out so you can change it.

use std::process::ExitCode;

use weir::prelude::*;
use weir_cli::jobs::wordcount::Word;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(input), Some(output)) = (args.next(), args.next()) else {
        eprintln!("usage: wordcount INPUT OUTPUT   (INPUT: a text file, a directory or a glob)");
        return ExitCode::from(2);
    };
    let source = match sources::files::text(&input) {
        Ok(source) => source,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };

    let p = Pipeline::new();
    p.read_from(source)
        // Split each line into lowercase words; `Word` stores short words inline.
        .flat_map(weir_cli::jobs::wordcount::words)
        // Count per word: accumulated on each core, then combined by word.
        .grouping_key(|word: &Word| word.clone())
        .aggregate(aggregate::counting())
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
