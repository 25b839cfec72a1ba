//! `weir top --url URL`: a live terminal view of the jobs and flows of a `weir` process
//! started with `--ui` (or `weir serve`), like `vector top`.
//!
//! ```text
//! weir top --url http://127.0.0.1:8080 [--token T] [--job ID] [--flow ID] [--once [--width N]]
//! ```
//!
//! It polls the REST API once a second ([`client`]), builds one table per job (its vertices)
//! and two per flow (processors, connections) ([`view::sections`]), and draws them with
//! ratatui on the terminal's alternate screen; ↑/↓, PgUp/PgDn scroll and q quits. `--once`
//! prints a single frame as plain text and exits, for scripts and tests.

pub mod client;
pub mod view;

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use client::{ApiClient, ApiSnapshot};
use view::Screen;

/// How often the view reads the API again.
const REFRESH: Duration = Duration::from_secs(1);

/// Arguments of `weir top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// The address a `weir ... --ui ADDR` or `weir serve` process printed, e.g.
    /// http://127.0.0.1:8080.
    #[arg(long, value_parser = parse_url)]
    pub url: String,
    /// The server's access token, sent as a bearer token.
    #[arg(long, env = "WEIR_UI_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Show only this job (its id or name).
    #[arg(long)]
    pub job: Option<String>,
    /// Show only this flow (its id or name).
    #[arg(long)]
    pub flow: Option<String>,
    /// Print one frame as plain text and exit.
    #[arg(long)]
    pub once: bool,
    /// With --once: the frame's width in columns [default: the terminal's, or 120].
    #[arg(long, requires = "once", value_parser = clap::value_parser!(u16).range(40..=1000))]
    pub width: Option<u16>,
}

/// Accepts an http or https URL with a host, without path beyond `/`.
pub(crate) fn parse_url(text: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(text).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err("expected http://HOST:PORT".into());
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// Runs `weir top`.
pub fn top(args: TopArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the HTTP client's runtime")?;
    let client = ApiClient::new(&args.url, args.token.clone());
    let fetch = |client: &ApiClient| {
        runtime.block_on(client.snapshot(args.job.as_deref(), args.flow.as_deref()))
    };
    if args.once {
        let snapshot = fetch(&client)?;
        let width = args.width.unwrap_or_else(|| {
            ratatui::crossterm::terminal::size()
                .ok()
                .filter(|_| std::io::stdout().is_terminal())
                .map_or(120, |(w, _)| w)
        });
        out!("{}", once_frame(&args.url, &snapshot, width))?;
        return Ok(());
    }
    if !std::io::stdout().is_terminal() {
        anyhow::bail!("standard output is not a terminal: use --once to print one frame");
    }
    let mut terminal = ratatui::try_init().context("cannot set up the terminal")?;
    let result = interactive(&mut terminal, &args.url, || fetch(&client));
    ratatui::restore();
    result
}

/// One frame for `--once`: a title line and the tables, as plain text.
pub fn once_frame(url: &str, snapshot: &ApiSnapshot, width: u16) -> String {
    let sections = view::sections(snapshot, None);
    format!(
        "weir top · {url}\n{}",
        view::plain_text(&view::render_sections(&sections, width))
    )
}

/// Refreshes every second and redraws until q, Esc or Ctrl-C.
fn interactive(
    terminal: &mut ratatui::DefaultTerminal,
    url: &str,
    mut fetch: impl FnMut() -> Result<ApiSnapshot, client::FetchError>,
) -> anyhow::Result<()> {
    let mut screen = Screen {
        url: url.to_owned(),
        ..Screen::default()
    };
    let mut previous: Option<(ApiSnapshot, Instant)> = None;
    let mut next_refresh = Instant::now();
    loop {
        if Instant::now() >= next_refresh {
            match fetch() {
                Ok(snapshot) => {
                    let taken = Instant::now();
                    let before = previous.as_ref().map(|(s, at)| (s, taken - *at));
                    screen.sections = view::sections(&snapshot, before);
                    screen.error = None;
                    screen.refreshes += 1;
                    previous = Some((snapshot, taken));
                }
                Err(e) => screen.error = Some(e.to_string()),
            }
            next_refresh = Instant::now() + REFRESH;
        }
        terminal
            .draw(|frame| view::draw(frame, &mut screen))
            .context("cannot draw on the terminal")?;
        let wait = next_refresh.saturating_duration_since(Instant::now());
        if !event::poll(wait).context("cannot read the terminal")? {
            continue;
        }
        if let Event::Key(key) = event::read().context("cannot read the terminal")? {
            if key.kind != KeyEventKind::Press {
                continue;
            }
            let page = terminal.size().map_or(10, |s| s.height.saturating_sub(2));
            match key.code {
                KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                    return Ok(());
                }
                KeyCode::Up | KeyCode::Char('k') => screen.scroll = screen.scroll.saturating_sub(1),
                KeyCode::Down | KeyCode::Char('j') => {
                    screen.scroll = screen.scroll.saturating_add(1)
                }
                KeyCode::PageUp => screen.scroll = screen.scroll.saturating_sub(page),
                KeyCode::PageDown => screen.scroll = screen.scroll.saturating_add(page),
                KeyCode::Home => screen.scroll = 0,
                _ => {}
            }
        }
    }
}
