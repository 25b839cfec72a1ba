//! What `weir top` shows: tables built from the API's JSON, drawn with ratatui.
//!
//! Building ([`sections`]) is separate from drawing ([`render_sections`], [`draw`]) so that
//! each can be tested on its own: the tables from API documents, the drawing on ratatui's
//! test backend.

use std::time::Duration;

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, Widget};
use weir_observe::model::{Connection, FlowDetail, JobDetail, Processor, ProcessorState, Vertex};

use super::client::ApiSnapshot;

/// How a cell is coloured: by what its value means, not by column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Ordinary text.
    Plain,
    /// Secondary text (ids, zero counts).
    Dim,
    /// Healthy: running, little queued.
    Good,
    /// Worth a look: half-full queues, some backpressure.
    Warn,
    /// Trouble: full queues, back pressure engaged, stopped or failed.
    Bad,
}

/// One cell of a table: its text and tone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCell {
    /// What is printed.
    pub text: String,
    /// How it is coloured.
    pub tone: Tone,
}

impl TableCell {
    fn new(text: impl Into<String>, tone: Tone) -> Self {
        Self {
            text: text.into(),
            tone,
        }
    }

    fn plain(text: impl Into<String>) -> Self {
        Self::new(text, Tone::Plain)
    }
}

/// One table on the screen: a job's vertices, a flow's processors or its connections.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// The title on its border.
    pub title: String,
    /// Column headings.
    pub header: Vec<&'static str>,
    /// Column widths; the first column takes what the others leave.
    pub widths: Vec<Constraint>,
    /// The rows, each with one cell per column.
    pub rows: Vec<Vec<TableCell>>,
}

impl Section {
    /// Lines the section takes: its border, its heading and its rows.
    fn height(&self) -> u16 {
        u16::try_from(self.rows.len().max(1) + 3).unwrap_or(u16::MAX)
    }
}

/// Builds the tables for `now`: per job its vertices, per flow its processors and its
/// connections. `before` (the previous refresh and the time since it, if any) gives the
/// backpressured share over that interval; without it the share is over the whole run.
/// Rates are the server's (sampled once a second over 1, 10 and 60 s).
pub fn sections(now: &ApiSnapshot, before: Option<(&ApiSnapshot, Duration)>) -> Vec<Section> {
    let mut out = Vec::new();
    for job in &now.jobs {
        let previous =
            before.and_then(|(b, _)| b.jobs.iter().find(|j| j.summary.id == job.summary.id));
        out.push(job_section(job, previous));
    }
    for flow in &now.flows {
        out.push(processor_section(flow));
        out.push(connection_section(flow));
    }
    out
}

fn job_section(job: &JobDetail, previous: Option<&JobDetail>) -> Section {
    let s = &job.summary;
    let rows = job
        .vertices
        .iter()
        .map(|v| {
            let before = previous.and_then(|p| p.vertices.iter().find(|b| b.name == v.name));
            vertex_row(v, before)
        })
        .collect();
    Section {
        title: format!(
            " job {} · {} · {} · id {} ",
            s.name,
            serde_plain(&s.status),
            duration(s.duration_ms as i64),
            s.id
        ),
        header: vec![
            "Vertex", "Par", "In", "Out", "In/s", "Out/s", "Out 10s", "Queued", "Fill", "Backpr.",
            "WM lag", "Late",
        ],
        widths: fill_then(&[4, 7, 7, 8, 8, 8, 12, 15, 7, 8, 6]),
        rows,
    }
}

/// The backpressured share of time since `before`, or over the whole run without it.
pub fn backpressured_share(v: &Vertex, before: Option<&Vertex>) -> f64 {
    let total = |v: &Vertex| v.busy_ms + v.idle_ms + v.backpressured_ms;
    match before {
        Some(b) if total(v) > total(b) => {
            v.backpressured_ms.saturating_sub(b.backpressured_ms) as f64
                / (total(v) - total(b)) as f64
        }
        _ if total(v) > 0 => v.backpressured_ms as f64 / total(v) as f64,
        _ => 0.0,
    }
}

fn vertex_row(v: &Vertex, before: Option<&Vertex>) -> Vec<TableCell> {
    let queued: u64 = v.queue_fill.iter().map(|q| q.queued).sum();
    let capacity: u64 = v.queue_fill.iter().map(|q| q.capacity).sum();
    let fill = v.queue_fill.iter().map(|q| q.fill).fold(0.0, f64::max);
    let bp = backpressured_share(v, before);
    let bp_tone = match bp {
        b if b > 0.5 => Tone::Bad,
        b if b > 0.1 => Tone::Warn,
        _ => Tone::Dim,
    };
    vec![
        TableCell::plain(v.name.clone()),
        TableCell::new(v.parallelism.to_string(), Tone::Dim),
        TableCell::plain(count(v.items_in as f64)),
        TableCell::plain(count(v.items_out as f64)),
        TableCell::new(format!("{}/s", count(v.in_rate_1s)), Tone::Good),
        TableCell::new(format!("{}/s", count(v.rate_1s)), Tone::Good),
        TableCell::plain(format!("{}/s", count(v.rate_10s))),
        if v.queue_fill.is_empty() {
            TableCell::new("source", Tone::Dim)
        } else {
            TableCell::plain(format!(
                "{}/{}",
                count(queued as f64),
                count(capacity as f64)
            ))
        },
        if v.queue_fill.is_empty() {
            TableCell::new("", Tone::Dim)
        } else {
            TableCell::new(bar(fill), fill_tone(fill))
        },
        TableCell::new(percent(bp), bp_tone),
        match v.watermark_lag_ms {
            Some(lag) => TableCell::plain(duration(lag)),
            None => TableCell::new("–", Tone::Dim),
        },
        TableCell::new(
            count(v.late_events as f64),
            if v.late_events > 0 {
                Tone::Warn
            } else {
                Tone::Dim
            },
        ),
    ]
}

fn processor_section(flow: &FlowDetail) -> Section {
    Section {
        title: format!(
            " flow {} · {} · processors ",
            flow.summary.name, flow.summary.status
        ),
        header: vec![
            "Processor",
            "Type",
            "Group",
            "State",
            "In",
            "Out",
            "In/s",
            "Out/s",
            "Out 10s",
            "In B/s",
            "Out B/s",
            "Bulletins",
        ],
        widths: fill_then(&[10, 8, 8, 7, 7, 8, 8, 8, 10, 10, 9]),
        rows: flow.processors.iter().map(processor_row).collect(),
    }
}

/// A processor's row: its counts, and its rates as the server sampled them (in and out
/// over the last second, out over the last 10 s, bytes in and out over the last second).
fn processor_row(p: &Processor) -> Vec<TableCell> {
    let state = match p.state {
        ProcessorState::Running => TableCell::new("running", Tone::Good),
        ProcessorState::Stopped => TableCell::new("stopped", Tone::Bad),
        ProcessorState::Disabled => TableCell::new("disabled", Tone::Dim),
    };
    // A rate that is 0 is dimmed: at a glance, what moves stands out.
    let rate = |r: f64| {
        TableCell::new(
            format!("{}/s", count(r)),
            if r > 0.0 { Tone::Good } else { Tone::Dim },
        )
    };
    let byte_rate = |r: f64| {
        TableCell::new(
            format!("{}/s", indicatif::BinaryBytes(r.round() as u64)),
            if r > 0.0 { Tone::Plain } else { Tone::Dim },
        )
    };
    vec![
        TableCell::plain(p.name.clone()),
        TableCell::new(p.kind.clone(), Tone::Dim),
        TableCell::new(p.group.clone(), Tone::Dim),
        state,
        TableCell::plain(count(p.flowfiles_in as f64)),
        TableCell::plain(count(p.flowfiles_out as f64)),
        rate(p.flowfiles_in_rate_1s),
        rate(p.flowfiles_out_rate_1s),
        rate(p.flowfiles_out_rate_10s),
        byte_rate(p.bytes_in_rate_1s),
        byte_rate(p.bytes_out_rate_1s),
        match p.bulletins.len() {
            0 => TableCell::new("0", Tone::Dim),
            n => TableCell::new(n.to_string(), Tone::Warn),
        },
    ]
}

fn connection_section(flow: &FlowDetail) -> Section {
    Section {
        title: format!(" flow {} · connections ", flow.summary.name),
        header: vec![
            "Connection",
            "Relationships",
            "Queued",
            "Bytes",
            "Fill",
            "Thresholds",
            "Back pressure",
        ],
        widths: fill_then(&[18, 8, 10, 15, 18, 13]),
        rows: flow.connections.iter().map(connection_row).collect(),
    }
}

/// How full a connection is: the larger of its count and size fractions, in 0..1.
pub fn connection_fill(c: &Connection) -> f64 {
    let fraction = |used: u64, limit: u64| match limit {
        0 => 0.0,
        limit => used as f64 / limit as f64,
    };
    fraction(c.queued_count, c.object_threshold)
        .max(fraction(c.queued_bytes, c.size_threshold_bytes))
        .min(1.0)
}

fn connection_row(c: &Connection) -> Vec<TableCell> {
    let fill = connection_fill(c);
    vec![
        TableCell::plain(format!("{} → {}", c.source, c.destination)),
        TableCell::new(c.relationships.join(", "), Tone::Dim),
        TableCell::plain(count(c.queued_count as f64)),
        TableCell::plain(indicatif::BinaryBytes(c.queued_bytes).to_string()),
        TableCell::new(
            bar(fill),
            if c.back_pressure {
                Tone::Bad
            } else {
                fill_tone(fill)
            },
        ),
        TableCell::new(
            format!(
                "{} / {}",
                count(c.object_threshold as f64),
                indicatif::BinaryBytes(c.size_threshold_bytes)
            ),
            Tone::Dim,
        ),
        if c.back_pressure {
            TableCell::new("ENGAGED", Tone::Bad)
        } else {
            TableCell::new("no", Tone::Dim)
        },
    ]
}

/// Column widths: the first column takes what the others, `lengths` wide, leave.
fn fill_then(lengths: &[u16]) -> Vec<Constraint> {
    std::iter::once(Constraint::Fill(1))
        .chain(lengths.iter().map(|&l| Constraint::Length(l)))
        .collect()
}

fn fill_tone(fill: f64) -> Tone {
    match fill {
        f if f >= 0.8 => Tone::Bad,
        f if f >= 0.5 => Tone::Warn,
        _ => Tone::Good,
    }
}

/// A count with an SI suffix, at most 6 characters: `999`, `1.23k`, `45.6M`.
pub fn count(value: f64) -> String {
    const SUFFIXES: [&str; 6] = ["", "k", "M", "G", "T", "P"];
    let mut v = value.max(0.0);
    let mut i = 0;
    while v >= 999.5 && i < SUFFIXES.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    match (i, v) {
        (0, v) if v.fract() == 0.0 || v >= 100.0 => format!("{v:.0}"),
        (0, v) => format!("{v:.1}"),
        (_, v) if v < 10.0 => format!("{v:.2}{}", SUFFIXES[i]),
        (_, v) if v < 100.0 => format!("{v:.1}{}", SUFFIXES[i]),
        (_, v) => format!("{v:.0}{}", SUFFIXES[i]),
    }
}

/// A share in 0..1 as a whole percentage.
fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// A short duration from milliseconds: `850ms`, `4.2s`, `3m05s`, `2h07m`.
pub fn duration(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let ms = ms.unsigned_abs();
    match ms {
        ms if ms < 1_000 => format!("{sign}{ms}ms"),
        ms if ms < 60_000 => format!("{sign}{:.1}s", ms as f64 / 1000.0),
        ms if ms < 3_600_000 => format!("{sign}{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        ms => format!("{sign}{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

/// A fill bar of 10 cells and the percentage: `███████░░░  72%`.
fn bar(fill: f64) -> String {
    let fill = fill.clamp(0.0, 1.0);
    let full = (fill * 10.0).round() as usize;
    format!(
        "{}{} {:>3.0}%",
        "█".repeat(full),
        "░".repeat(10 - full),
        fill * 100.0
    )
}

/// The lowercase name serde gives a unit enum (the API's spelling of a status).
fn serde_plain<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn style(tone: Tone) -> Style {
    match tone {
        Tone::Plain => Style::default(),
        Tone::Dim => Style::default().fg(Color::DarkGray),
        Tone::Good => Style::default().fg(Color::Green),
        Tone::Warn => Style::default().fg(Color::Yellow),
        Tone::Bad => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
    }
}

/// Draws every section, one under the other, into a buffer `width` columns wide and as tall
/// as they need (one line saying so when there is nothing to show).
pub fn render_sections(sections: &[Section], width: u16) -> Buffer {
    let height: u16 = sections.iter().map(Section::height).sum::<u16>().max(1);
    let mut buffer = Buffer::empty(Rect::new(0, 0, width, height));
    if sections.is_empty() {
        Paragraph::new("No jobs or flows in this process.")
            .style(style(Tone::Dim))
            .render(Rect::new(0, 0, width, 1), &mut buffer);
        return buffer;
    }
    let mut y = 0;
    for section in sections {
        let area = Rect::new(0, y, width, section.height());
        y += section.height();
        let header = Row::new(section.header.iter().copied())
            .style(Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED));
        let rows = section.rows.iter().map(|row| {
            Row::new(
                row.iter()
                    .map(|c| Cell::from(c.text.as_str()).style(style(c.tone))),
            )
        });
        let block = Block::bordered().title(Span::styled(
            section.title.as_str(),
            Style::default().add_modifier(Modifier::BOLD),
        ));
        let table = Table::new(rows, section.widths.iter().copied())
            .header(header)
            .column_spacing(1)
            .block(block);
        if section.rows.is_empty() {
            Widget::render(table, area, &mut buffer);
            let inner = Rect::new(1, area.y + 2, width.saturating_sub(2), 1);
            Paragraph::new("(none)")
                .style(style(Tone::Dim))
                .render(inner, &mut buffer);
        } else {
            Widget::render(table, area, &mut buffer);
        }
    }
    buffer
}

/// The buffer as plain text, one line per row, trailing spaces removed.
pub fn plain_text(buffer: &Buffer) -> String {
    let area = buffer.area;
    let mut out = String::new();
    for y in area.top()..area.bottom() {
        let mut line = String::new();
        for x in area.left()..area.right() {
            line.push_str(buffer[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The state the interactive screen shows.
#[derive(Debug, Default)]
pub struct Screen {
    /// The server's address, for the title line.
    pub url: String,
    /// The tables of the last successful refresh.
    pub sections: Vec<Section>,
    /// The last refresh's error, shown until a refresh succeeds.
    pub error: Option<String>,
    /// How many successful refreshes there were.
    pub refreshes: u64,
    /// The first line of tables shown (scrolling).
    pub scroll: u16,
}

/// Draws one frame: a title line, then the tables from line `screen.scroll` on.
pub fn draw(frame: &mut Frame, screen: &mut Screen) {
    let area = frame.area();
    let mut title = vec![
        Span::styled(
            " weir top ",
            Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD),
        ),
        Span::raw(format!(
            " {} · refresh #{} · ",
            screen.url, screen.refreshes
        )),
        Span::styled("↑/↓ scroll · q quit", style(Tone::Dim)),
    ];
    if let Some(error) = &screen.error {
        title.push(Span::styled(format!("  {error}"), style(Tone::Bad)));
    }
    frame.render_widget(
        Paragraph::new(Line::from(title)),
        Rect::new(area.x, area.y, area.width, 1),
    );
    if area.height < 2 {
        return;
    }
    let body = Rect::new(area.x, area.y + 1, area.width, area.height - 1);
    let content = render_sections(&screen.sections, body.width);
    let max_scroll = content.area.height.saturating_sub(body.height);
    screen.scroll = screen.scroll.min(max_scroll);
    let buffer = frame.buffer_mut();
    for y in 0..body.height.min(content.area.height - screen.scroll) {
        for x in 0..body.width {
            buffer[(body.x + x, body.y + y)] = content[(x, y + screen.scroll)].clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::*;

    /// A job and a flow as the API sends them.
    fn snapshot(bp_ms: u64, out: u64) -> ApiSnapshot {
        let job = serde_json::json!({
            "id": "1", "name": "q5", "status": "running", "started_ms": 0, "duration_ms": 65_000,
            "error": null, "last_snapshot": null,
            "vertices": [
                {"name": "generator", "parallelism": 2, "items_in": 0, "items_out": 12_345,
                 "rate_1s": 5110.0, "rate_10s": 5000.0, "rate_60s": 4990.0,
                 "in_rate_1s": 0.0, "in_rate_10s": 0.0, "in_rate_60s": 0.0, "queue_fill": [],
                 "busy_ms": 100, "idle_ms": 100, "backpressured_ms": bp_ms,
                 "watermark_ms": 1000, "watermark_lag_ms": 4200, "late_events": 0, "history": [1.0]},
                {"name": "window", "parallelism": 2, "items_in": 12_000, "items_out": 30,
                 "rate_1s": 3.0, "rate_10s": 2.5, "rate_60s": 2.0,
                 "in_rate_1s": 1200.0, "in_rate_10s": 1100.0, "in_rate_60s": 1000.0,
                 "queue_fill": [{"input": 0, "queued": 1880, "capacity": 2048, "fill": 0.918}],
                 "busy_ms": 10, "idle_ms": 0, "backpressured_ms": 0,
                 "watermark_ms": null, "watermark_lag_ms": null, "late_events": 7, "history": []}
            ],
            "edges": [{"from": "generator", "to": "window", "kind": "partitioned",
                       "from_ordinal": 0, "to_ordinal": 0, "priority": 0}]
        });
        let flow = serde_json::json!({
            "id": "lines", "name": "lines", "status": "running",
            "processors": [
                {"id": "read", "name": "read", "type": "GetFile", "group": "main",
                 "state": "running", "flowfiles_in": 0, "flowfiles_out": out, "bytes_in": 0,
                 "bytes_out": 2048, "tasks": 9,
                 "flowfiles_in_rate_1s": 0.0, "flowfiles_in_rate_10s": 0.0,
                 "flowfiles_in_rate_60s": 0.0, "flowfiles_out_rate_1s": 40.0,
                 "flowfiles_out_rate_10s": 12.5, "flowfiles_out_rate_60s": 2.0,
                 "bytes_in_rate_1s": 0.0, "bytes_in_rate_10s": 0.0, "bytes_in_rate_60s": 0.0,
                 "bytes_out_rate_1s": 1536.0, "bytes_out_rate_10s": 300.0,
                 "bytes_out_rate_60s": 50.0, "bulletins": []},
                {"id": "write", "name": "write", "type": "PutFile", "group": "main",
                 "state": "stopped", "flowfiles_in": 3, "flowfiles_out": 3, "bytes_in": 10,
                 "bytes_out": 10, "tasks": 3,
                 "flowfiles_in_rate_1s": 0.0, "flowfiles_in_rate_10s": 0.0,
                 "flowfiles_in_rate_60s": 0.05, "flowfiles_out_rate_1s": 0.0,
                 "flowfiles_out_rate_10s": 0.0, "flowfiles_out_rate_60s": 0.05,
                 "bytes_in_rate_1s": 0.0, "bytes_in_rate_10s": 0.0, "bytes_in_rate_60s": 0.2,
                 "bytes_out_rate_1s": 0.0, "bytes_out_rate_10s": 0.0,
                 "bytes_out_rate_60s": 0.2,
                 "bulletins": [{"time_ms": 1, "level": "WARNING", "message": "slow"}]}
            ],
            "connections": [
                {"id": "read/success/write", "source": "read", "destination": "write",
                 "relationships": ["success"], "queued_count": 10, "queued_bytes": 100,
                 "object_threshold": 10, "size_threshold_bytes": 1_073_741_824,
                 "back_pressure": true}
            ],
            "groups": [{"id": "main", "name": "main", "engine": "traditional"}]
        });
        ApiSnapshot {
            jobs: vec![serde_json::from_value(job).unwrap()],
            flows: vec![serde_json::from_value(flow).unwrap()],
        }
    }

    fn texts(row: &[TableCell]) -> Vec<&str> {
        row.iter().map(|c| c.text.as_str()).collect()
    }

    #[test]
    fn a_job_becomes_one_row_per_vertex_with_rates_fill_and_backpressure() {
        let tables = sections(&snapshot(200, 5), None);
        assert_eq!(tables.len(), 3, "one job table, two flow tables");
        let job = &tables[0];
        assert_eq!(job.title, " job q5 · running · 1m05s · id 1 ");
        assert_eq!(job.header.len(), job.widths.len());
        assert_eq!(
            texts(&job.rows[0]),
            [
                "generator",
                "2",
                "0",
                "12.3k",
                "0/s",
                "5.11k/s",
                "5.00k/s",
                "source",
                "",
                "50%",
                "4.2s",
                "0"
            ]
        );
        // Backpressured half the time over the whole run: a warning, not yet high.
        assert_eq!(job.rows[0][9].tone, Tone::Warn);
        let window = texts(&job.rows[1]);
        assert_eq!(window[4], "1.20k/s");
        assert_eq!(window[7], "1.88k/2.05k");
        assert_eq!(window[8], "█████████░  92%");
        assert_eq!(job.rows[1][8].tone, Tone::Bad, "a queue over 80% is red");
        assert_eq!(window[10], "–", "no watermark yet");
        assert_eq!(job.rows[1][11].tone, Tone::Warn, "late events stand out");
    }

    #[test]
    fn a_long_vertex_name_is_shown_whole_where_the_terminal_has_room() {
        let long = "fused(read-json-lines, filter-bids, map-to-price, accumulate)";
        let mut now = snapshot(200, 5);
        now.jobs[0].vertices[0].name = long.to_string();
        let wide = plain_text(&render_sections(&sections(&now, None), 220));
        assert!(wide.contains(long), "{wide}");
        // A narrow terminal cuts the name, never the numbers after it.
        let narrow = plain_text(&render_sections(&sections(&now, None), 120));
        assert!(
            !narrow.contains(long) && narrow.contains("fused(read-json"),
            "{narrow}"
        );
        assert!(narrow.contains("5.11k/s"), "{narrow}");
    }

    #[test]
    fn backpressure_is_taken_over_the_last_refresh_and_flow_rates_are_the_servers() {
        let before = snapshot(200, 5);
        let mut now = snapshot(200, 25);
        // 300 ms more of work, all of it backpressured.
        now.jobs[0].vertices[0].backpressured_ms += 300;
        let tables = sections(&now, Some((&before, Duration::from_millis(500))));
        assert_eq!(tables[0].rows[0][9].text, "100%");
        assert_eq!(tables[0].rows[0][9].tone, Tone::Bad);
        // The same with or without the previous refresh: the server's 1 s and 10 s rates.
        for before in [None, Some((&before, Duration::from_millis(500)))] {
            let processors = &sections(&now, before)[1];
            let read = texts(&processors.rows[0]);
            assert_eq!(
                read[4..11],
                ["0", "25", "0/s", "40/s", "12.5/s", "0 B/s", "1.50 KiB/s"]
            );
            assert_eq!(processors.rows[0][7].tone, Tone::Good);
            assert_eq!(processors.rows[0][6].tone, Tone::Dim, "nothing in: dimmed");
        }
    }

    #[test]
    fn the_processor_table_shows_the_rate_columns_in_a_frame() {
        let text = plain_text(&render_sections(&sections(&snapshot(0, 5), None), 140));
        let header = text
            .lines()
            .find(|l| l.contains("Processor"))
            .expect("the processors' header");
        for column in ["In/s", "Out/s", "Out 10s", "In B/s", "Out B/s"] {
            assert!(header.contains(column), "{column} in {header}");
        }
        let read = text.lines().find(|l| l.starts_with("│read ")).unwrap();
        assert!(
            read.contains("40/s") && read.contains("12.5/s") && read.contains("1.50 KiB/s"),
            "{read}"
        );
        // At 120 columns (the default without a terminal) the rates still fit.
        let narrow = plain_text(&render_sections(&sections(&snapshot(0, 5), None), 120));
        let read = narrow.lines().find(|l| l.starts_with("│read ")).unwrap();
        assert!(read.contains("1.50 KiB/s"), "{narrow}");
    }

    #[test]
    fn a_flow_becomes_a_processor_table_and_a_connection_table() {
        let tables = sections(&snapshot(0, 5), None);
        let processors = &tables[1];
        assert_eq!(processors.title, " flow lines · running · processors ");
        assert_eq!(
            texts(&processors.rows[1]),
            [
                "write", "PutFile", "main", "stopped", "3", "3", "0/s", "0/s", "0/s", "0 B/s",
                "0 B/s", "1"
            ]
        );
        assert_eq!(processors.rows[1][3].tone, Tone::Bad);
        assert_eq!(processors.rows[1][11].tone, Tone::Warn);
        let connections = &tables[2];
        assert_eq!(
            texts(&connections.rows[0]),
            [
                "read → write",
                "success",
                "10",
                "100 B",
                "██████████ 100%",
                "10 / 1.00 GiB",
                "ENGAGED"
            ]
        );
        assert_eq!(connections.rows[0][6].tone, Tone::Bad);
    }

    #[test]
    fn counts_and_durations_stay_short() {
        assert_eq!(count(0.0), "0");
        assert_eq!(count(999.0), "999");
        assert_eq!(count(2.5), "2.5");
        assert_eq!(count(1000.0), "1.00k");
        assert_eq!(count(45_600_000.0), "45.6M");
        assert_eq!(count(999_999.0), "1.00M");
        assert_eq!(duration(850), "850ms");
        assert_eq!(duration(-4200), "-4.2s");
        assert_eq!(duration(185_000), "3m05s");
        assert_eq!(duration(7_620_000), "2h07m");
    }

    #[test]
    fn the_screen_draws_the_tables_on_a_terminal_and_scrolls() {
        let mut terminal = Terminal::new(TestBackend::new(140, 12)).unwrap();
        let mut screen = Screen {
            url: "http://127.0.0.1:9".into(),
            sections: sections(&snapshot(0, 5), None),
            refreshes: 3,
            ..Screen::default()
        };
        terminal.draw(|f| draw(f, &mut screen)).unwrap();
        let text = plain_text(terminal.backend().buffer());
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].contains("weir top") && lines[0].contains("refresh #3"),
            "{text}"
        );
        assert!(lines[1].contains("job q5 · running"), "{text}");
        assert!(
            lines[2].contains("Vertex") && lines[2].contains("Fill"),
            "{text}"
        );
        assert!(
            lines[3].contains("generator") && lines[3].contains("5.11k/s"),
            "{text}"
        );
        assert!(
            lines[4].contains("window") && lines[4].contains("92%"),
            "{text}"
        );
        // The fill cell is red and bold.
        let x = lines[4].find("█").unwrap();
        let x = lines[4][..x].chars().count() as u16;
        assert_eq!(terminal.backend().buffer()[(x, 4)].fg, Color::Red);

        // Scrolling past the end stops at the last line of the tables.
        screen.scroll = 1000;
        screen.error = Some("cannot reach the server".into());
        terminal.draw(|f| draw(f, &mut screen)).unwrap();
        let text = plain_text(terminal.backend().buffer());
        assert!(
            text.lines()
                .next()
                .unwrap()
                .contains("cannot reach the server")
        );
        assert!(
            text.contains("ENGAGED"),
            "the last table is in view: {text}"
        );
        assert_eq!(screen.scroll, 5 + 5 + 4 - 11);
    }

    #[test]
    fn nothing_to_show_says_so() {
        let text = plain_text(&render_sections(&[], 60));
        assert_eq!(text, "No jobs or flows in this process.\n");
    }
}
