#!/usr/bin/env python3
"""NEXMark q0, q5 and q7 in Flink SQL over a JSON Lines event file, beside Weir.

The yardstick for issue 14's "Weir >= 10x Flink SQL" goal: Flink runs the same queries over
the same file (the JSON Lines event format `weir nexmark generate` writes) at the same parallelism, with
the README's event-time semantics, and writes its rows to CSV; its rows are checked against
`weir nexmark run`'s.

Install (PyFlink bundles the Flink distribution's jars; it needs a Java 11+ `java` on the
PATH; measured with Flink 2.2.0 on OpenJDK 17):

    python3 -m venv /tmp/flink-venv
    /tmp/flink-venv/bin/pip install apache-flink==2.2.0

Run:

    # one Flink query; prints the timings as one `flink ...` line
    /tmp/flink-venv/bin/python benches/flink/nexmark_flink.py run \
        --query q5 --input target/bench-data/nexmark-2000000-rate20000-seed0.jsonl \
        --output /tmp/flink-q5 --parallelism 2

    # compare Flink's part files with Weir's CSV (row count, then the sorted rows)
    python3 benches/flink/nexmark_flink.py compare --query q5 \
        --flink /tmp/flink-q5 --weir /tmp/weir-q5.csv

    # the same events as two files, for Flink's second source instance (see below)
    python3 benches/flink/nexmark_flink.py split --parts 2 \
        --input target/bench-data/nexmark-2000000-rate20000-seed0.jsonl \
        --output target/bench-data/nexmark-2000000-rate20000-seed0-split2

    # Weir and Flink interleaved, every output checked, wall and CPU seconds, the ratios
    /tmp/flink-venv/bin/python benches/flink/nexmark_flink.py bench \
        --input target/bench-data/nexmark-2000000-rate20000-seed0.jsonl \
        --flink-input target/bench-data/nexmark-2000000-rate20000-seed0-split2 \
        --weir target/release/weir --queries q0,q5,q7 --runs 3 --parallelism 2

The event file is the NEXMark bench's (`cargo bench --bench nexmark` writes it), or:
`weir nexmark generate --events 2000000 --rate 20000 --seed 0 --output FILE`.

# How Flink reads the file

As Flink's own NEXMark project does with its `nexmark` source table, the three event types
are one table (`filesystem` connector, `json` format) with every field of every type as a
nullable column, filtered by `type`. Event time is `TO_TIMESTAMP_LTZ(date_time, 3)` with the
watermark `ts - INTERVAL '4' SECOND`: one watermark over all event types, `max(date_time) -
4000 ms`, as the README defines. The job runs in streaming mode (event-time windows fired by
the watermark, not a batch plan); the bounded file ends with a watermark of +infinity, which
closes the open windows, as the README's "finite input" rule says.

Flink's watermark differs from Weir's lateness rule in two ways that matter only for files
whose events are out of order by 4 s or more: Flink emits the watermark periodically
(`pipeline.auto-watermark-interval`, 200 ms of wall time), not after each event, so it
drops fewer events as late; and Flink drops an event only in a window operator, when its
window has already fired (q0 drops nothing), whereas Weir drops any event below the
watermark at the source. On a file in time order (the bench's file: the generator's
`out_of_order_ms` is 0) no event is late under either rule, and the rows are identical.

# The queries

- q0: every bid's `auction, bidder, price, date_time`.
- q5: Flink NEXMark's q5 (bids counted per auction in hopping 10 s windows sliding by 2 s,
  joined with each window's maximum count), written with the README's columns.
- q7: Flink NEXMark's q7 (each tumbling 10 s window's maximum price, joined back with the
  bids), with the window bounds exact (`window_start <= t < window_end`; the NEXMark project
  writes `BETWEEN`, which also takes a bid at the next window's first millisecond).

Variants (`--variant`): q7 also as a window join (`window`: the bids of each tumbling window
joined with its maximum price); the bench runs every variant and reports each, so that the
ratio can be taken to Flink's best. q5's plan is already a window join (the planner turns
the join on both window bounds into a `WindowJoin`); a Window Top-N would need `RANK()` to
keep ties, and Flink supports only `ROW_NUMBER()` there.

One file is read by one source instance: the `filesystem` source splits a file at the blocks
its file system reports, and Flink's local file system reports a whole file as one block,
so at parallelism 2 one instance reads and parses the file while the other has no split
(the operators after the first exchange run on both). `split` writes the same events as N
files, line i to file i mod N, each still in time order; `bench --flink-input DIR` gives
Flink those files instead, so that both of its source instances parse, with the watermark
the minimum of theirs. The rows are the same; Weir still reads the one file.

Timing: `startup_s` is the Python import and the JVM gateway's start; `job_s` is from the
INSERT's submission (planning, the local mini-cluster's start, the run) to its completion;
`net_runtime_s` is Flink's own measure of the run (`JobExecutionResult.getNetRuntime`,
without planning and the cluster's start); `total_s` the process until the job is done.
CPU seconds are the Python process's and the JVM's, read from `/proc` before the JVM exits
(PyFlink does not wait for its JVM, so a parent's rusage would miss it); `job_cpu_s` is
the part spent from submission to completion.
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

T_START = time.monotonic()

# Every field of every event type, nullable: a person has no `price`, a bid no `name`.
SOURCE_DDL = """
CREATE TABLE nexmark (
    `type` STRING,
    id BIGINT,
    name STRING,
    email_address STRING,
    credit_card STRING,
    city STRING,
    state STRING,
    item_name STRING,
    description STRING,
    initial_bid BIGINT,
    reserve BIGINT,
    expires BIGINT,
    seller BIGINT,
    category BIGINT,
    auction BIGINT,
    bidder BIGINT,
    price BIGINT,
    channel STRING,
    url STRING,
    date_time BIGINT,
    extra STRING,
    ts AS TO_TIMESTAMP_LTZ(date_time, 3),
    WATERMARK FOR ts AS ts - INTERVAL '4' SECOND
) WITH (
    'connector' = 'filesystem',
    'path' = '{path}',
    'format' = 'json',
    'json.fail-on-missing-field' = 'false',
    'json.ignore-parse-errors' = 'false'
)
"""

BID_VIEW = """
CREATE VIEW bid AS
SELECT auction, bidder, price, channel, url, date_time, ts, extra
FROM nexmark WHERE `type` = 'bid'
"""

# Window bounds as ms since the epoch. The windows (2 s slide, 10 s size) start and end on
# whole seconds, and the session time zone is UTC, so whole seconds are exact.
def epoch_ms(column: str) -> str:
    return (
        f"CAST(TIMESTAMPDIFF(SECOND, TIMESTAMP '1970-01-01 00:00:00', {column}) AS BIGINT)"
        " * 1000"
    )


SINK_COLUMNS = {
    "q0": "auction BIGINT, bidder BIGINT, price BIGINT, date_time BIGINT",
    "q5": "window_start BIGINT, window_end BIGINT, auction BIGINT, num BIGINT",
    "q7": (
        "window_start BIGINT, window_end BIGINT, auction BIGINT, bidder BIGINT,"
        " price BIGINT, date_time BIGINT"
    ),
}

QUERIES = {
    ("q0", "nexmark"): "SELECT auction, bidder, price, date_time FROM bid",
    # Flink NEXMark's q5: a window aggregation joined with the maximum of a second one.
    ("q5", "nexmark"): f"""
SELECT {epoch_ms('AuctionBids.starttime')}, {epoch_ms('AuctionBids.endtime')},
       AuctionBids.auction, AuctionBids.num
FROM (
    SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime
    FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
    GROUP BY auction, window_start, window_end
) AS AuctionBids
JOIN (
    SELECT MAX(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
    FROM (
        SELECT COUNT(*) AS num, window_start AS starttime, window_end AS endtime
        FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
        GROUP BY auction, window_start, window_end
    ) AS CountBids
    GROUP BY CountBids.starttime, CountBids.endtime
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime
   AND AuctionBids.endtime = MaxBids.endtime
   AND AuctionBids.num >= MaxBids.maxn
""",
    # Flink NEXMark's q7 (a regular join on the price, then the window's bounds), exact bounds.
    ("q7", "nexmark"): f"""
SELECT {epoch_ms('B1.window_start')}, {epoch_ms('B1.window_end')},
       B.auction, B.bidder, B.price, B.date_time
FROM bid B
JOIN (
    SELECT MAX(price) AS maxprice, window_start, window_end
    FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE CAST(B.ts AS TIMESTAMP(3)) >= B1.window_start
  AND CAST(B.ts AS TIMESTAMP(3)) < B1.window_end
""",
    # A window join: the bids of each tumbling window joined with its maximum price.
    ("q7", "window"): f"""
SELECT {epoch_ms('B.window_start')}, {epoch_ms('B.window_end')},
       B.auction, B.bidder, B.price, B.date_time
FROM (
    SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))
) B
JOIN (
    SELECT MAX(price) AS maxprice, window_start, window_end
    FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end
) M
ON B.window_start = M.window_start AND B.window_end = M.window_end
   AND B.price = M.maxprice
""",
}

VARIANTS = {
    query: [v for (q, v) in QUERIES if q == query] for query in ("q0", "q5", "q7")
}


def jvm_cpu_seconds() -> float:
    """User + system CPU seconds of this process's `java` children (the PyFlink gateway)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        # comm may hold spaces; the fields after its closing parenthesis are fixed.
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == me and comm == "java":
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_flink(args: argparse.Namespace) -> None:
    """Runs one query in a local Flink mini-cluster and prints one `flink ...` timing line."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    settings = EnvironmentSettings.in_streaming_mode()
    env = TableEnvironment.create(settings)
    t_gateway = time.monotonic()
    config = env.get_config()
    config.set("parallelism.default", str(args.parallelism))
    config.set("table.local-time-zone", "UTC")
    # As Flink's NEXMark setup: rows reused between chained operators; state on the heap.
    config.set("pipeline.object-reuse", "true")
    config.set("state.backend.type", "hashmap")

    output = Path(args.output)
    if output.exists():
        shutil.rmtree(output)
    env.execute_sql(SOURCE_DDL.format(path=Path(args.input).resolve()))
    env.execute_sql(BID_VIEW)
    env.execute_sql(
        f"CREATE TABLE sink ({SINK_COLUMNS[args.query]}) WITH ("
        f"'connector' = 'filesystem', 'path' = '{output.resolve()}', 'format' = 'csv')"
    )
    insert = f"INSERT INTO sink {QUERIES[(args.query, args.variant)]}"
    if args.explain:
        print(env.explain_sql(insert), file=sys.stderr)
    cpu_before = own_cpu_seconds() + jvm_cpu_seconds()
    t_submit = time.monotonic()
    result = env.execute_sql(insert)
    result.wait()
    t_done = time.monotonic()
    # The JobMaster's own measure of the run, without planning and the cluster's start.
    net = result.get_job_client().get_job_execution_result().result().get_net_runtime()
    cpu = own_cpu_seconds() + jvm_cpu_seconds()
    rows = count_rows(output)
    print(
        f"flink query={args.query} variant={args.variant} rows={rows}"
        f" startup_s={t_gateway - T_START:.3f} job_s={t_done - t_submit:.3f}"
        f" net_runtime_s={net / 1000:.3f}"
        f" job_cpu_s={cpu - cpu_before:.3f} total_s={t_done - T_START:.3f} cpu_s={cpu:.3f}",
        flush=True,
    )


def part_files(directory: Path) -> list[Path]:
    """Flink's finished part files (in-progress or hidden files are not output)."""
    return sorted(
        p
        for p in directory.rglob("*")
        if p.is_file() and not p.name.startswith(".") and not p.name.startswith("_")
    )


def count_rows(directory: Path) -> int:
    return sum(sum(1 for _ in open(p, "rb")) for p in part_files(directory))


def read_rows(path: Path, header: bool) -> list[tuple[int, ...]]:
    files = part_files(path) if path.is_dir() else [path]
    rows = []
    for f in files:
        with open(f, newline="") as fh:
            reader = csv.reader(fh)
            if header:
                next(reader, None)
            rows.extend(tuple(int(x) for x in r) for r in reader)
    return rows


def compare(query: str, flink: Path, weir: Path) -> str:
    """Checks that Flink's rows are Weir's: same count, same rows once sorted. Returns a
    one-line summary; raises on a difference."""
    ours = read_rows(weir, header=True)
    theirs = read_rows(flink, header=False)
    if len(ours) != len(theirs):
        raise SystemExit(f"{query}: Weir wrote {len(ours)} rows, Flink {len(theirs)}")
    ours.sort()
    theirs.sort()
    for a, b in zip(ours, theirs):
        if a != b:
            raise SystemExit(f"{query}: first difference: Weir {a}, Flink {b}")
    return f"{query}: {len(ours)} rows, identical once sorted"


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """Runs `cmd`; returns its wall seconds, the CPU seconds of it and its waited-for
    children, and its standard output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def split(source: Path, parts: int, directory: Path) -> None:
    """Writes the lines of `source` as `parts` files in `directory`, line i to file i mod
    `parts`, so that each file keeps the source's order."""
    directory.mkdir(parents=True, exist_ok=True)
    outs = [open(directory / f"part-{i}.jsonl", "wb") for i in range(parts)]
    with open(source, "rb") as fh:
        for i, line in enumerate(fh):
            outs[i % parts].write(line)
    for out in outs:
        out.close()


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def bench(args: argparse.Namespace) -> None:
    """Weir, then every Flink variant on every Flink input, per query, `--runs` times; each
    Flink output checked against Weir's. Prints each run and a summary of medians."""
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    queries = args.queries.split(",")
    flink_inputs = [("file", args.input)]
    if args.flink_input:
        flink_inputs.append(("split", args.flink_input))
    weir_runs: dict[str, list[tuple[float, float]]] = {}
    flink_runs: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    for run in range(args.runs):
        for query in queries:
            weir_out = work / f"weir-{query}.csv"
            load = loadavg()
            wall, cpu, _ = timed(
                [
                    args.weir, "nexmark", "run", "--query", query, "--input", args.input,
                    "--output", str(weir_out), "--parallelism", str(args.parallelism),
                ]
            )
            weir_runs.setdefault(query, []).append((wall, cpu))
            print(f"run {run} {query} weir wall_s={wall:.3f} cpu_s={cpu:.3f} load={load}",
                  flush=True)
            for name, path in flink_inputs:
                for variant in VARIANTS[query]:
                    flink_out = work / f"flink-{query}-{variant}-{name}"
                    load = loadavg()
                    wall, _, out = timed(
                        [
                            sys.executable, __file__, "run", "--query", query, "--variant",
                            variant, "--input", path, "--output", str(flink_out),
                            "--parallelism", str(args.parallelism),
                        ]
                    )
                    line = next(l for l in out.splitlines() if l.startswith("flink "))
                    fields = {
                        k: float(v)
                        for k, v in (f.split("=") for f in line.split()[1:])
                        if k.endswith("_s")
                    }
                    # PyFlink does not wait for its JVM, so `cpu_s` (read from /proc) is
                    # the process's CPU, not the rusage of `timed`.
                    fields["process_s"] = wall
                    flink_runs.setdefault((query, variant, name), []).append(fields)
                    print(f"run {run} input={name} {line} process_s={wall:.3f} load={load}",
                          flush=True)
                    print("  " + compare(query, flink_out, weir_out), flush=True)
    print()
    print(f"median of {args.runs} runs (min-max), seconds; ratios of medians to Weir's wall")
    for query in queries:
        weir = weir_runs[query]
        weir_wall = median([r[0] for r in weir])
        weir_cpu = median([r[1] for r in weir])
        print(f"{query} weir: wall {fmt([r[0] for r in weir])}, CPU {fmt([r[1] for r in weir])}")
        for name, _ in flink_inputs:
            for variant in VARIANTS[query]:
                rs = flink_runs[(query, variant, name)]

                def col(key: str) -> list[float]:
                    return [r[key] for r in rs]

                print(
                    f"{query} flink {variant} input={name}:"
                    f" job {fmt(col('job_s'))} (CPU {fmt(col('job_cpu_s'))},"
                    f" net runtime {fmt(col('net_runtime_s'))}),"
                    f" process {fmt(col('process_s'))} (CPU {fmt(col('cpu_s'))},"
                    f" startup {fmt(col('startup_s'))});"
                    f" job/weir {median(col('job_s')) / weir_wall:.1f}x,"
                    f" net/weir {median(col('net_runtime_s')) / weir_wall:.1f}x,"
                    f" process/weir {median(col('process_s')) / weir_wall:.1f}x,"
                    f" job CPU/weir CPU {median(col('job_cpu_s')) / weir_cpu:.1f}x"
                )


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def fmt(xs: list[float]) -> str:
    return f"{median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="one query in Flink")
    run.add_argument("--query", choices=["q0", "q5", "q7"], required=True)
    run.add_argument("--variant", default="nexmark")
    run.add_argument("--input", required=True)
    run.add_argument("--output", required=True, help="a directory for Flink's part files")
    run.add_argument("--parallelism", type=int, default=2)
    run.add_argument("--explain", action="store_true", help="print the plan to stderr")
    cmp = sub.add_parser("compare", help="Flink's rows against Weir's CSV")
    cmp.add_argument("--query", choices=["q0", "q5", "q7"], required=True)
    cmp.add_argument("--flink", required=True, help="Flink's output directory")
    cmp.add_argument("--weir", required=True, help="Weir's CSV file")
    b = sub.add_parser("bench", help="Weir and Flink interleaved, outputs checked")
    b.add_argument("--input", required=True)
    b.add_argument("--weir", required=True, help="the weir binary")
    b.add_argument("--queries", default="q0,q5,q7")
    b.add_argument("--runs", type=int, default=3)
    b.add_argument("--parallelism", type=int, default=2)
    b.add_argument("--flink-input", help="the same events for Flink, as a directory (`split`)")
    b.add_argument("--work", default="target/flink-bench", help="where outputs go")
    sp = sub.add_parser("split", help="an event file as N files, line i to file i mod N")
    sp.add_argument("--input", required=True)
    sp.add_argument("--parts", type=int, default=2)
    sp.add_argument("--output", required=True, help="the directory to write")
    args = parser.parse_args()
    if args.command == "run":
        if (args.query, args.variant) not in QUERIES:
            parser.error(f"{args.query} has variants {VARIANTS[args.query]}")
        run_flink(args)
    elif args.command == "compare":
        print(compare(args.query, Path(args.flink), Path(args.weir)))
    elif args.command == "split":
        split(Path(args.input), args.parts, Path(args.output))
    else:
        bench(args)


if __name__ == "__main__":
    main()
