//! PostgreSQL with `tokio-postgres`: JSON records into a table, by INSERT or UPSERT, one
//! database transaction per batch.
//!
//! [`RecordWriter::write_batch`] takes a batch of items (each a list of records, e.g. one
//! flow file's JSON Lines) and writes them all in one transaction. The records of all items
//! with the same columns go to the server as one `jsonb` array in one statement, which
//! `jsonb_populate_recordset` turns into rows of the table's own column types, so a batch
//! costs one statement per column set: one alone is its own transaction, several are
//! pipelined between `BEGIN` and `COMMIT`; the writer
//! drives its connection itself while it waits, so the round trip has no hand-off to a
//! connection task. A record keeps its JSON text as it came (checked to be one object when
//! parsed): the array is the records' texts joined, and the server parses the values once,
//! into the column types. When the server refuses an item (a bad value, an unknown column),
//! the transaction rolls back and every item is written again in a transaction of its own,
//! so that only the bad ones fail. When the connection breaks, every item of the batch is
//! [`ItemOutcome::Retry`] and the next batch connects again.
//!
//! No call waits for ever: connecting, each statement and each lock wait have timeouts on
//! the server, and each whole call one on the client ([`PgTimeouts`]); a call that runs out
//! is cancelled and its items are [`ItemOutcome::TimedOut`].
//!
//! ```no_run
//! # async fn demo() {
//! use bytes::Bytes;
//! use weir_connectors::postgres::{ItemOutcome, PgConfig, RecordWriter, StatementType, parse_json_lines};
//! let config = PgConfig::new("host=127.0.0.1 user=postgres dbname=test", None, None);
//! let mut writer = RecordWriter::new(config, "orders", StatementType::Upsert { keys: vec!["id".into()] });
//! let records = parse_json_lines(&Bytes::from_static(b"{\"id\":1,\"total\":9.5}\n")).unwrap();
//! let outcomes = writer.write_batch(&[records]).await;
//! assert!(matches!(outcomes[0], ItemOutcome::Written(1)));
//! # }
//! ```

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;

use bytes::Bytes;
use rustc_hash::FxHashMap;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use smol_str::SmolStr;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, NoTls, Statement};

use crate::ConnectorError;

/// One record: a JSON object, kept as its text with where each member's value is in it.
///
/// Parsing checks the whole text is one JSON object (strictly, as `serde_json` reads it)
/// and costs one allocation (the member list) plus one per member name longer than 23
/// bytes; the values are not decoded, and the text is shared with the buffer it was parsed
/// from ([`Record::parse_shared`]), not copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The object's text, checked to be UTF-8 when parsed.
    json: Bytes,
    /// Each member's name and its value's bytes in `json`, in the text's order (a name
    /// written twice is here twice; the last wins, as in PostgreSQL's `jsonb`).
    members: Vec<(SmolStr, Range<usize>)>,
}

/// A JSON object's members, read without decoding their values.
struct Members<'a>(Vec<(SmolStr, &'a RawValue)>);

/// A member's name (unescaped).
struct Name(SmolStr);

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Name;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Name, E> {
                Ok(Name(SmolStr::new(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Members<'de>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                // A record of the usual size without regrowing.
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(Name(name)) = map.next_key()? {
                    members.push((name, map.next_value::<&'de RawValue>()?));
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(V)
    }
}

impl Record {
    /// Parses one JSON object (surrounding whitespace allowed), copying its text.
    ///
    /// # Errors
    /// What is wrong: not UTF-8, not JSON, or JSON but not an object.
    pub fn parse(text: &[u8]) -> Result<Record, String> {
        Record::parse_shared(Bytes::copy_from_slice(text))
    }

    /// [`Record::parse`], the record keeping `line`'s buffer (shared, not copied).
    ///
    /// # Errors
    /// As [`Record::parse`].
    pub fn parse_shared(mut line: Bytes) -> Result<Record, String> {
        let whole = std::str::from_utf8(&line).map_err(|e| e.to_string())?;
        let text = whole.trim_matches(|c: char| c.is_ascii_whitespace());
        let at = text.as_ptr() as usize - whole.as_ptr() as usize;
        let Members(members) = serde_json::from_str::<Members>(text).map_err(|e| {
            if e.is_data() {
                "not a JSON object".to_string()
            } else {
                e.to_string()
            }
        })?;
        let base = text.as_ptr() as usize;
        let members = members
            .into_iter()
            .map(|(name, value)| {
                let start = value.get().as_ptr() as usize - base;
                (name, start..start + value.get().len())
            })
            .collect();
        // Trimmed in place: no second share of the buffer.
        line.truncate(at + text.len());
        bytes::Buf::advance(&mut line, at);
        Ok(Record {
            json: line,
            members,
        })
    }

    /// The object's JSON text. Costs a check of the text as UTF-8 (held as bytes, shared
    /// with what it was parsed from).
    pub fn json(&self) -> &str {
        checked(&self.json)
    }

    /// The JSON text of member `name`'s value (the last, if written twice).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.members
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, r)| checked(&self.json[r.clone()]))
    }

    /// The members' names, in the text's order (a name written twice comes twice).
    pub fn columns(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|(n, _)| n.as_str())
    }
}

/// Bytes of a record's text, which were checked to be UTF-8 when it was parsed (a value's
/// bytes are whole characters: JSON tokens start and end on ASCII bytes).
fn checked(text: &[u8]) -> &str {
    std::str::from_utf8(text).expect("a record's text was checked as UTF-8 when parsed")
}

/// JSON text already checked, sent as a `jsonb` parameter as it is.
#[derive(Debug)]
struct JsonbText<'a>(&'a [u8]);

impl ToSql for JsonbText<'_> {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        // jsonb's binary format: a version byte, then the text.
        out.extend_from_slice(&[1]);
        out.extend_from_slice(self.0);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSONB
    }

    to_sql_checked!();
}

/// The records as one JSON array's text.
fn json_array(records: &[&Record]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + records.iter().map(|r| r.json.len() + 1).sum::<usize>());
    out.push(b'[');
    for (i, r) in records.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&r.json);
    }
    out.push(b']');
    out
}

/// How long a database call may take. Every call of a [`RecordWriter`] is bounded: the
/// connection by `connect`, each statement on the server by `statement` (PostgreSQL's
/// `statement_timeout`) and each lock wait by `lock` (`lock_timeout`), both set on the
/// connection; and the whole call (connecting, preparing and writing a batch) by `call` on
/// the client, which also ends a call whose server or network stops answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgTimeouts {
    /// Making the connection (TCP and start-up).
    pub connect: Duration,
    /// One statement on the server.
    pub statement: Duration,
    /// One wait for a lock on the server.
    pub lock: Duration,
    /// One whole call of the writer, on the client.
    pub call: Duration,
}

impl Default for PgTimeouts {
    /// 10 s to connect, 30 s per statement, 10 s per lock wait, 45 s per call.
    fn default() -> PgTimeouts {
        PgTimeouts {
            connect: Duration::from_secs(10),
            statement: Duration::from_secs(30),
            lock: Duration::from_secs(10),
            call: Duration::from_secs(45),
        }
    }
}

impl PgTimeouts {
    /// Every limit at most `limit` (a stateless group's timeout: a call then ends within
    /// it).
    pub fn capped(self, limit: Duration) -> PgTimeouts {
        PgTimeouts {
            connect: self.connect.min(limit),
            statement: self.statement.min(limit),
            lock: self.lock.min(limit),
            call: self.call.min(limit),
        }
    }
}

/// Where and as whom to connect, and how long calls may take. The password is never
/// printed.
#[derive(Clone)]
pub struct PgConfig {
    config: tokio_postgres::Config,
    shown: String,
    timeouts: PgTimeouts,
}

impl fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgConfig({})", self.shown)
    }
}

impl fmt::Display for PgConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl PgConfig {
    /// A configuration from a connection string (`postgres://user@host:port/db` or
    /// `host=... dbname=...`), with an optional user and password that override the
    /// string's. A string that does not parse is kept and reported at the first connection.
    pub fn new(url: &str, user: Option<&str>, password: Option<&str>) -> PgConfig {
        let mut config: tokio_postgres::Config = url.parse().unwrap_or_else(|_| {
            let mut c = tokio_postgres::Config::new();
            // An empty host list fails at connect with a clear message.
            c.dbname(url);
            c
        });
        if let Some(u) = user.filter(|u| !u.is_empty()) {
            config.user(u);
        }
        if let Some(p) = password.filter(|p| !p.is_empty()) {
            config.password(p);
        }
        let hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(h) => h.clone(),
                tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
            })
            .collect();
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let shown = format!(
            "postgres://{}:{port}/{}",
            hosts.join(","),
            config.get_dbname().unwrap_or("")
        );
        let mut c = PgConfig {
            config,
            shown,
            timeouts: PgTimeouts::default(),
        };
        c.apply_timeouts();
        c
    }

    /// This configuration with `timeouts` (see [`PgTimeouts`]); the default ones otherwise.
    pub fn with_timeouts(mut self, timeouts: PgTimeouts) -> PgConfig {
        self.timeouts = timeouts;
        self.apply_timeouts();
        self
    }

    /// The timeouts in force.
    pub fn timeouts(&self) -> PgTimeouts {
        self.timeouts
    }

    /// Sets the connect timeout, and the server's statement and lock timeouts as options of
    /// every session the configuration opens.
    fn apply_timeouts(&mut self) {
        // At least 1 ms: 0 would mean no timeout to the server.
        let ms = |d: Duration| d.as_millis().max(1);
        self.config.connect_timeout(self.timeouts.connect);
        self.config.options(format!(
            "-c statement_timeout={} -c lock_timeout={}",
            ms(self.timeouts.statement),
            ms(self.timeouts.lock)
        ));
    }

    /// Connects; the connection task runs on the current runtime.
    ///
    /// # Errors
    /// The client's error.
    pub async fn connect(&self) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = self.config.connect(NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("postgres connection ended: {e}");
            }
        });
        Ok(client)
    }
}

/// INSERT, or INSERT ... ON CONFLICT (keys) DO UPDATE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatementType {
    /// Plain inserts: a duplicate key is a bad record.
    Insert,
    /// Inserts that update the row with the same key columns.
    Upsert {
        /// The key columns (a unique index must cover them).
        keys: Vec<String>,
    },
}

/// What happened to one item of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemOutcome {
    /// Committed: this many records.
    Written(u64),
    /// The server (or the writer) refused the item's records: route it to failure.
    Bad(String),
    /// The database could not be reached or the transaction failed for a passing reason:
    /// try again later.
    Retry(String),
    /// The call did not end within its timeouts (a statement, a lock wait, or the whole
    /// call; see [`PgTimeouts`]): its transaction was cancelled and nothing of it is
    /// written. Try again later.
    TimedOut(String),
}

/// A record that is not a JSON object, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct RecordError {
    /// The line in the content.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses JSON Lines: one object per non-blank line, each record sharing `content`'s
/// buffer.
///
/// # Errors
/// [`RecordError`] naming the first bad line.
pub fn parse_json_lines(content: &Bytes) -> Result<Vec<Record>, RecordError> {
    // The usual content is one record (a message per flow file): room for it at once.
    let mut out = Vec::with_capacity(1);
    let mut start = 0;
    // Ends of lines found with `memchr`, not byte by byte: this runs on every flow file.
    let ends = memchr::memchr_iter(b'\n', content).chain(std::iter::once(content.len()));
    for (i, end) in ends.enumerate() {
        let at = start;
        start = end + 1;
        if content[at..end].iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        out.push(
            Record::parse_shared(content.slice(at..end)).map_err(|message| RecordError {
                line: i + 1,
                message,
            })?,
        );
    }
    Ok(out)
}

/// Quotes an identifier, each dot-separated part (`schema.table`).
fn quote(name: &str) -> String {
    name.split('.')
        .map(|p| format!("\"{}\"", p.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(".")
}

/// A connection's I/O: the writer polls it while it waits for the server.
type Driver = Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send>>;

/// Writes records to one table. See the [module docs](self).
pub struct RecordWriter {
    config: PgConfig,
    table: String,
    statement: StatementType,
    client: Option<Client>,
    /// The client's connection, driven by [`drive`] on the writer's own task, so that
    /// requests go out and answers come in with no hand-off to another task.
    connection: Option<Driver>,
    /// Statements by column set: a flow mostly writes one or two, so a list beats a map
    /// (and is looked up with borrowed column names).
    prepared: Vec<(Vec<String>, Statement)>,
    /// Bumped at every new connection: an open transaction belongs to one.
    generation: u64,
    /// The connection generation of the transaction [`RecordWriter::write_in_transaction`]
    /// keeps open, if any.
    open: Option<u64>,
}

impl fmt::Debug for RecordWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecordWriter({} {})", self.config, self.table)
    }
}

/// A prepared item: its statement's columns and the records to write (borrowed: they go to
/// the server as one JSON array, serialized once, never copied).
#[derive(Debug)]
struct Prepared<'a> {
    /// Its column set, by place in the batch's [`Shapes`].
    shape: usize,
    rows: Rows<'a>,
    count: u64,
}

/// An item's records to write: all of them (the usual case, nothing to allocate), or those
/// left after an UPSERT's later records of a key replaced earlier ones.
#[derive(Debug)]
enum Rows<'a> {
    All(&'a [Record]),
    Kept(Vec<&'a Record>),
}

impl<'a> Rows<'a> {
    fn iter(&self) -> impl Iterator<Item = &'a Record> + '_ {
        let (all, kept): (&'a [Record], &[&'a Record]) = match self {
            Rows::All(all) => (all, &[]),
            Rows::Kept(kept) => (&[], kept),
        };
        all.iter().chain(kept.iter().copied())
    }

    fn len(&self) -> usize {
        match self {
            Rows::All(all) => all.len(),
            Rows::Kept(kept) => kept.len(),
        }
    }
}

/// The column sets of a batch's items, each once (sorted names, borrowed from the records),
/// in the order first met: a statement per set.
///
/// The records of a batch mostly have the same members in the same order: an item whose
/// records all name the members of the last item's first record, in its order, has that
/// item's set, told by comparing names, with no set built, sorted or looked up.
#[derive(Debug, Default)]
struct Shapes<'a> {
    sets: Vec<Vec<&'a str>>,
    /// The first record of the last item placed, and its set.
    last: Option<(&'a Record, usize)>,
}

impl<'a> Shapes<'a> {
    /// The set of `records`' columns (`None` when they have none).
    fn place(&mut self, records: &'a [Record]) -> Option<usize> {
        let first = records.first()?;
        let uniform = records[1..].iter().all(|r| r.columns().eq(first.columns()));
        if uniform
            && let Some((last, shape)) = self.last
            && first.columns().eq(last.columns())
        {
            return Some(shape);
        }
        let mut columns: Vec<&str> = records.iter().flat_map(Record::columns).collect();
        columns.sort_unstable();
        columns.dedup();
        if columns.is_empty() {
            return None;
        }
        let shape = match self.sets.iter().position(|s| *s == columns) {
            Some(shape) => shape,
            None => {
                self.sets.push(columns);
                self.sets.len() - 1
            }
        };
        if uniform {
            self.last = Some((first, shape));
        }
        Some(shape)
    }
}

/// The value of a record's key columns, to find records of the same key: borrowed from the
/// record for one key column written without escapes (the usual case, no allocation).
fn key_of<'a>(record: &'a Record, keys: &[String]) -> Cow<'a, str> {
    use std::fmt::Write;
    if let [k] = keys {
        match record.get(k) {
            Some(v) if !v.contains('\\') => return Cow::Borrowed(v),
            None => return Cow::Borrowed(""),
            Some(_) => {}
        }
    }
    let mut key = String::new();
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            key.push('\u{1f}');
        }
        match record.get(k) {
            // Escapes may spell one string two ways: compare the decoded value.
            Some(v) if v.contains('\\') => match serde_json::from_str::<serde_json::Value>(v) {
                Ok(v) => write!(key, "{v}").expect("writing to a String cannot fail"),
                Err(_) => key.push_str(v),
            },
            Some(v) => key.push_str(v),
            None => {}
        }
    }
    Cow::Owned(key)
}

enum Failure {
    Connection(String),
    Item(String),
    TimedOut(String),
}

impl RecordWriter {
    /// A writer into `table` (not connected yet).
    pub fn new(config: PgConfig, table: &str, statement: StatementType) -> RecordWriter {
        RecordWriter {
            config,
            table: table.to_string(),
            statement,
            client: None,
            connection: None,
            prepared: Vec::new(),
            generation: 0,
            open: None,
        }
    }

    /// True while the writer holds a connection. One the server closed while the writer was
    /// idle counts until the next batch finds out (and connects again).
    pub fn connected(&self) -> bool {
        self.connection.is_some() && self.client.as_ref().is_some_and(|c| !c.is_closed())
    }

    /// The item of `records`, its column set placed in `shapes`: `None` when it has nothing
    /// to write.
    ///
    /// # Errors
    /// What is wrong with a record (an UPSERT's record without a key value).
    fn prepare_item<'a>(
        &self,
        records: &'a [Record],
        shapes: &mut Shapes<'a>,
    ) -> Result<Option<Prepared<'a>>, String> {
        let Some(shape) = shapes.place(records) else {
            return Ok(None);
        };
        if let StatementType::Upsert { keys } = &self.statement {
            for (i, r) in records.iter().enumerate() {
                if let Some(k) = keys.iter().find(|k| r.get(k).is_none_or(|v| v == "null")) {
                    return Err(format!("record {}: no value for key column `{k}`", i + 1));
                }
            }
        }
        let rows = match &self.statement {
            StatementType::Upsert { keys } if records.len() > 1 => {
                let kept = last_of_each_key(records, keys);
                if kept.len() == records.len() {
                    Rows::All(records)
                } else {
                    Rows::Kept(kept)
                }
            }
            // One record (a message per flow file) has no earlier record to replace.
            _ => Rows::All(records),
        };
        Ok(Some(Prepared {
            shape,
            count: rows.len() as u64,
            rows,
        }))
    }

    fn sql(&self, columns: &[&str]) -> String {
        let table = quote(&self.table);
        let cols = columns
            .iter()
            .map(|c| quote(c))
            .collect::<Vec<_>>()
            .join(", ");
        let mut sql = format!(
            "INSERT INTO {table} ({cols}) SELECT {cols} FROM jsonb_populate_recordset(NULL::{table}, $1)"
        );
        if let StatementType::Upsert { keys } = &self.statement {
            let keys_sql = keys.iter().map(|k| quote(k)).collect::<Vec<_>>().join(", ");
            let updates: Vec<String> = columns
                .iter()
                .filter(|c| !keys.iter().any(|k| k == *c))
                .map(|c| format!("{0} = EXCLUDED.{0}", quote(c)))
                .collect();
            if updates.is_empty() {
                sql.push_str(&format!(" ON CONFLICT ({keys_sql}) DO NOTHING"));
            } else {
                sql.push_str(&format!(
                    " ON CONFLICT ({keys_sql}) DO UPDATE SET {}",
                    updates.join(", ")
                ));
            }
        }
        sql
    }

    /// Writes `items` in one transaction and says what happened to each. Never panics and
    /// never returns early: every item gets an outcome. The call ends within the
    /// configuration's [`PgTimeouts::call`]: past it, the statement running is cancelled on
    /// the server, the connection is dropped (the next call connects again), and every item
    /// not already written is [`ItemOutcome::TimedOut`].
    pub async fn write_batch(&mut self, items: &[Vec<Record>]) -> Vec<ItemOutcome> {
        let limit = self.config.timeouts.call;
        let cancel = self.client.as_ref().map(Client::cancel_token);
        match tokio::time::timeout(limit, self.write_batch_within(items)).await {
            Ok(outcomes) => outcomes,
            Err(_) => {
                // The server may still be working on (or waiting in) a statement: cancel it,
                // so that its locks and transaction go now, not when the server notices the
                // closed connection.
                let cancel = self.client.as_ref().map(Client::cancel_token).or(cancel);
                if let Some(token) = cancel {
                    tokio::spawn(async move {
                        if let Err(e) = token.cancel_query(NoTls).await {
                            tracing::debug!("postgres: cancelling a timed-out call failed: {e}");
                        }
                    });
                }
                self.client = None;
                self.connection = None;
                let why = format!(
                    "{}: no answer within {limit:?}; the call was cancelled",
                    self.config
                );
                items
                    .iter()
                    .map(|_| ItemOutcome::TimedOut(why.clone()))
                    .collect()
            }
        }
    }

    async fn write_batch_within(&mut self, items: &[Vec<Record>]) -> Vec<ItemOutcome> {
        let mut outcomes: Vec<Option<ItemOutcome>> = vec![None; items.len()];
        let mut good: Vec<(usize, Prepared)> = Vec::with_capacity(items.len());
        let mut shapes = Shapes::default();
        for (i, records) in items.iter().enumerate() {
            match self.prepare_item(records, &mut shapes) {
                Ok(None) => outcomes[i] = Some(ItemOutcome::Written(0)),
                Ok(Some(p)) => good.push((i, p)),
                Err(e) => outcomes[i] = Some(ItemOutcome::Bad(e)),
            }
        }
        if !good.is_empty() {
            match self.transaction(&shapes, &good).await {
                Ok(()) => {
                    for (i, p) in &good {
                        outcomes[*i] = Some(ItemOutcome::Written(p.count));
                    }
                }
                Err(Failure::Connection(e)) => {
                    for (i, _) in &good {
                        outcomes[*i] = Some(ItemOutcome::Retry(e.clone()));
                    }
                }
                Err(Failure::TimedOut(e)) => {
                    for (i, _) in &good {
                        outcomes[*i] = Some(ItemOutcome::TimedOut(e.clone()));
                    }
                }
                Err(Failure::Item(_)) => {
                    // Isolate the bad items: each in a transaction of its own.
                    for (i, p) in good {
                        let count = p.count;
                        outcomes[i] = Some(
                            match self
                                .transaction(&shapes, std::slice::from_ref(&(i, p)))
                                .await
                            {
                                Ok(()) => ItemOutcome::Written(count),
                                Err(Failure::Connection(e)) => ItemOutcome::Retry(e),
                                Err(Failure::TimedOut(e)) => ItemOutcome::TimedOut(e),
                                Err(Failure::Item(e)) => ItemOutcome::Bad(e),
                            },
                        );
                    }
                }
            }
        }
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| ItemOutcome::Retry("not attempted".into())))
            .collect()
    }

    /// Writes `items` in the writer's open transaction (begun by the first call, and kept
    /// open until [`commit`](Self::commit) or [`rollback`](Self::rollback)), and says what
    /// happened to each: nothing is committed yet. The batch runs under one savepoint; when
    /// the server refuses an item, the batch goes back to the savepoint and each item runs
    /// under its own, so that only the bad items are left out (one more round trip each),
    /// and the transaction goes on. When the connection breaks or a call times out, the
    /// open transaction is lost with what earlier calls wrote in it: every item is then
    /// [`ItemOutcome::Retry`] or [`ItemOutcome::TimedOut`] and the caller must give back
    /// everything the transaction held. Bounded by [`PgTimeouts::call`], as
    /// [`write_batch`](Self::write_batch).
    pub async fn write_in_transaction(&mut self, items: &[Vec<Record>]) -> Vec<ItemOutcome> {
        let limit = self.config.timeouts.call;
        let cancel = self.client.as_ref().map(Client::cancel_token);
        match tokio::time::timeout(limit, self.write_open_within(items)).await {
            Ok(outcomes) => outcomes,
            Err(_) => {
                if let Some(token) = self.client.as_ref().map(Client::cancel_token).or(cancel) {
                    tokio::spawn(async move {
                        let _ = token.cancel_query(NoTls).await;
                    });
                }
                self.client = None;
                self.connection = None;
                self.open = None;
                let why = format!(
                    "{}: no answer within {limit:?}; the transaction was cancelled",
                    self.config
                );
                items
                    .iter()
                    .map(|_| ItemOutcome::TimedOut(why.clone()))
                    .collect()
            }
        }
    }

    async fn write_open_within(&mut self, items: &[Vec<Record>]) -> Vec<ItemOutcome> {
        let mut outcomes: Vec<Option<ItemOutcome>> = vec![None; items.len()];
        let mut good: Vec<(usize, Prepared)> = Vec::with_capacity(items.len());
        let mut shapes = Shapes::default();
        for (i, records) in items.iter().enumerate() {
            match self.prepare_item(records, &mut shapes) {
                Ok(None) => outcomes[i] = Some(ItemOutcome::Written(0)),
                Ok(Some(p)) => good.push((i, p)),
                Err(e) => outcomes[i] = Some(ItemOutcome::Bad(e)),
            }
        }
        let lost = |why: String, timed_out: bool| {
            if timed_out {
                ItemOutcome::TimedOut(why)
            } else {
                ItemOutcome::Retry(why)
            }
        };
        // The group's first batch begins the transaction in the same round trip as its
        // statements (BEGIN pipelined before them): a round trip fewer per group transaction.
        let begin = match self.needs_begin().await {
            Ok(b) => b,
            Err(Failure::TimedOut(e)) => return self.lose(items, lost(e, true)),
            Err(Failure::Connection(e) | Failure::Item(e)) => {
                return self.lose(items, lost(e, false));
            }
        };
        if !good.is_empty() {
            match self.run_in(&shapes, &good, Some("weir_batch"), begin).await {
                Ok(()) => {
                    for (i, p) in &good {
                        outcomes[*i] = Some(ItemOutcome::Written(p.count));
                    }
                }
                Err(Failure::Connection(e)) => return self.lose(items, lost(e, false)),
                Err(Failure::TimedOut(e)) => return self.lose(items, lost(e, true)),
                Err(Failure::Item(_)) => {
                    for (i, p) in good {
                        let count = p.count;
                        let result = self
                            .run(&shapes, std::slice::from_ref(&(i, p)), Some("weir_item"))
                            .await;
                        outcomes[i] = Some(match result {
                            Ok(()) => ItemOutcome::Written(count),
                            Err(Failure::Item(e)) => ItemOutcome::Bad(e),
                            Err(Failure::Connection(e)) => {
                                return self.lose(items, lost(e, false));
                            }
                            Err(Failure::TimedOut(e)) => return self.lose(items, lost(e, true)),
                        });
                    }
                }
            }
        }
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| ItemOutcome::Retry("not attempted".into())))
            .collect()
    }

    /// The open transaction is gone (the connection with it): every item gets `outcome`.
    fn lose(&mut self, items: &[Vec<Record>], outcome: ItemOutcome) -> Vec<ItemOutcome> {
        self.open = None;
        self.client = None;
        self.connection = None;
        items.iter().map(|_| outcome.clone()).collect()
    }

    /// Whether the open transaction must begin (it is not open on the current connection).
    /// One open on a connection that has since been replaced is lost: an error.
    async fn needs_begin(&mut self) -> Result<bool, Failure> {
        let was = self.open;
        self.connect().await?;
        match was {
            Some(g) if g == self.generation => Ok(false),
            Some(_) => {
                self.open = None;
                Err(Failure::Connection(format!(
                    "{}: the connection was lost with the open transaction",
                    self.config
                )))
            }
            None => Ok(true),
        }
    }

    /// True while a transaction of [`write_in_transaction`](Self::write_in_transaction) is
    /// open.
    pub fn in_transaction(&self) -> bool {
        self.open.is_some()
    }

    /// Commits the open transaction (nothing to do when none is open). Bounded by
    /// [`PgTimeouts::call`].
    ///
    /// # Errors
    /// [`ConnectorError::Unavailable`] when the commit failed or its outcome is unknown (the
    /// connection broke or the call timed out); nothing of the transaction may then be
    /// counted on as written.
    pub async fn commit(&mut self) -> Result<(), ConnectorError> {
        self.finish("COMMIT").await
    }

    /// Rolls the open transaction back (nothing to do when none is open). A failure only
    /// drops the connection: the server then rolls back by itself.
    pub async fn rollback(&mut self) {
        if let Err(e) = self.finish("ROLLBACK").await {
            tracing::debug!("postgres: rollback: {e}");
        }
    }

    async fn finish(&mut self, sql: &str) -> Result<(), ConnectorError> {
        let Some(generation) = self.open.take() else {
            return Ok(());
        };
        let server = self.config.to_string();
        let unavailable = |reason: String| ConnectorError::Unavailable {
            server: server.clone(),
            reason,
        };
        if generation != self.generation || !self.connected() {
            return Err(unavailable(
                "the connection was lost with the open transaction".into(),
            ));
        }
        let limit = self.config.timeouts.call;
        let (client, connection) = self.parts();
        let result =
            tokio::time::timeout(limit, drive(connection, client.batch_execute(sql))).await;
        match result {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => {
                self.client = None;
                self.connection = None;
                Err(unavailable(e.to_string()))
            }
            Ok(Err(why)) => {
                self.client = None;
                self.connection = None;
                Err(unavailable(why))
            }
            Err(_) => {
                self.client = None;
                self.connection = None;
                Err(unavailable(format!("{sql} had no answer within {limit:?}")))
            }
        }
    }

    /// Connects unless connected. What the server sent while the writer was idle is read
    /// first, so that a connection the server closed meanwhile is replaced, not used.
    async fn connect(&mut self) -> Result<(), Failure> {
        if let Some(c) = self.connection.as_mut()
            && futures::FutureExt::now_or_never(c.as_mut()).is_some()
        {
            self.connection = None;
        }
        if !self.connected() {
            self.prepared.clear();
            self.client = None;
            self.connection = None;
            let (client, connection) = self
                .config
                .config
                .connect(NoTls)
                .await
                .map_err(|e| Failure::Connection(format!("{}: {e}", self.config)))?;
            self.client = Some(client);
            self.connection = Some(Box::pin(connection));
            self.generation += 1;
        }
        Ok(())
    }

    /// The connected client and its connection, to [`drive`] while waiting on the client.
    fn parts(&mut self) -> (&Client, &mut Option<Driver>) {
        (
            self.client.as_ref().expect("connected first"),
            &mut self.connection,
        )
    }

    /// Forgets the connection after `drive` found it ended.
    fn lost(&mut self, why: String) -> Failure {
        self.client = None;
        self.connection = None;
        Failure::Connection(format!("{}: {why}", self.config))
    }

    async fn statement(&mut self, columns: &[&str]) -> Result<Statement, Failure> {
        if let Some((_, s)) = self
            .prepared
            .iter()
            .find(|(c, _)| c.iter().map(String::as_str).eq(columns.iter().copied()))
        {
            return Ok(s.clone());
        }
        let sql = self.sql(columns);
        self.connect().await?;
        let (client, connection) = self.parts();
        let s = match drive(connection, client.prepare_typed(&sql, &[Type::JSONB])).await {
            Ok(s) => s.map_err(|e| classify(&e))?,
            Err(why) => return Err(self.lost(why)),
        };
        self.prepared
            .push((columns.iter().map(|c| c.to_string()).collect(), s.clone()));
        Ok(s)
    }

    /// Merges the items' rows into one statement per column set (so a batch of similar
    /// items costs one statement), in the order the sets were first met; for UPSERT, the
    /// last row of a key wins, as it would with one statement per item in order.
    fn merge<'a, 'b>(
        &self,
        shapes: &'b Shapes<'a>,
        items: &[(usize, Prepared<'a>)],
    ) -> Vec<(&'b [&'a str], Vec<&'a Record>)> {
        // Each group sized at once: growing a vector of rows copies it.
        let mut sizes = vec![0; shapes.sets.len()];
        for (_, p) in items {
            sizes[p.shape] += p.rows.len();
        }
        let mut groups: Vec<Vec<&'a Record>> = sizes.into_iter().map(Vec::with_capacity).collect();
        for (_, p) in items {
            groups[p.shape].extend(p.rows.iter());
        }
        shapes
            .sets
            .iter()
            .zip(groups)
            .filter(|(_, rows)| !rows.is_empty())
            .map(|(columns, rows)| {
                let rows = match &self.statement {
                    StatementType::Insert => rows,
                    StatementType::Upsert { keys } => last_of_each_key(rows, keys),
                };
                (columns.as_slice(), rows)
            })
            .collect()
    }

    async fn transaction(
        &mut self,
        shapes: &Shapes<'_>,
        items: &[(usize, Prepared<'_>)],
    ) -> Result<(), Failure> {
        self.run(shapes, items, None).await
    }

    /// Runs the items' statements: in a transaction of their own, or with `savepoint`, in
    /// the open transaction under that savepoint (rolled back to it when a statement
    /// fails, released otherwise).
    async fn run(
        &mut self,
        shapes: &Shapes<'_>,
        items: &[(usize, Prepared<'_>)],
        savepoint: Option<&str>,
    ) -> Result<(), Failure> {
        self.run_in(shapes, items, savepoint, false).await
    }

    /// [`run`](Self::run); with `begin`, the open transaction begins in the same pipeline,
    /// before the savepoint (and is open after, unless the connection failed).
    async fn run_in(
        &mut self,
        shapes: &Shapes<'_>,
        items: &[(usize, Prepared<'_>)],
        savepoint: Option<&str>,
        begin: bool,
    ) -> Result<(), Failure> {
        // Connected first: a new connection drops the statements prepared on the old one.
        self.connect().await?;
        let merged = self.merge(shapes, items);
        let mut statements = Vec::with_capacity(merged.len());
        for (columns, _) in &merged {
            statements.push(self.statement(columns).await?);
        }
        // One statement is a transaction of its own (the server's implicit one): no BEGIN
        // or COMMIT, whose answers the server sends apart, each a wake-up of the waiting
        // thread. Several are pipelined between BEGIN and COMMIT.
        let single = statements.len() == 1 && savepoint.is_none();
        let (open, close, undo) = match savepoint {
            Some(name) if begin => (
                format!("BEGIN; SAVEPOINT {name}"),
                format!("RELEASE SAVEPOINT {name}"),
                format!("ROLLBACK TO SAVEPOINT {name}"),
            ),
            Some(name) => (
                format!("SAVEPOINT {name}"),
                format!("RELEASE SAVEPOINT {name}"),
                format!("ROLLBACK TO SAVEPOINT {name}"),
            ),
            None => ("BEGIN".into(), "COMMIT".into(), "ROLLBACK".into()),
        };
        let (client, connection) = self.parts();
        let work = async {
            let texts: Vec<Vec<u8>> = merged.iter().map(|(_, rows)| json_array(rows)).collect();
            if single {
                return client
                    .execute(&statements[0], &[&JsonbText(&texts[0])])
                    .await
                    .map(drop)
                    .map_err(|e| classify(&e));
            }
            // Pipelined: BEGIN, every statement and COMMIT are sent before the first answer
            // is awaited, one round trip in all (each request goes out when its future is
            // first polled, in this order). A statement that fails aborts the transaction,
            // and the server then answers COMMIT by rolling back, so nothing of a failed
            // batch is written.
            let runs = texts
                .iter()
                .zip(&statements)
                .map(|(text, s)| async move { client.execute(s, &[&JsonbText(text)]).await });
            let (begin, runs, commit) = futures::future::join3(
                client.batch_execute(&open),
                futures::future::join_all(runs),
                client.batch_execute(&close),
            )
            .await;
            begin.map_err(|e| classify(&e))?;
            for r in runs {
                r.map_err(|e| classify(&e))?;
            }
            commit.map_err(|e| classify(&e))
        };
        let result = match drive(connection, work).await {
            Ok(r) => r,
            Err(why) => return Err(self.lost(why)),
        };
        if begin && savepoint.is_some() && !matches!(result, Err(Failure::Connection(_))) {
            // BEGIN went first in the pipeline: whatever the statements did, the
            // transaction is open (a failed statement is undone to its savepoint below).
            self.open = Some(self.generation);
        }
        match &result {
            // A failed statement ended its implicit transaction itself.
            Err(Failure::Item(..) | Failure::TimedOut(..)) if single => {}
            Err(Failure::Item(..) | Failure::TimedOut(..)) => {
                let (client, connection) = self.parts();
                match drive(connection, client.batch_execute(&undo)).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        self.client = None;
                        self.connection = None;
                        return Err(Failure::Connection(e.to_string()));
                    }
                    Err(why) => return Err(self.lost(why)),
                }
            }
            Err(Failure::Connection(..)) => {
                self.client = None;
                self.connection = None;
            }
            Ok(()) => {}
        }
        result
    }
}

/// Waits for `work` (requests of the connection's client) while driving `connection`, on
/// this task: the requests are written and the answers read here. `Err` with the reason
/// when the connection ends first; `work` then never completes.
async fn drive<T>(
    connection: &mut Option<Driver>,
    work: impl Future<Output = T>,
) -> Result<T, String> {
    let Some(connection) = connection.as_mut() else {
        return Err("not connected".into());
    };
    tokio::select! {
        // The work first: its requests are queued before the connection writes them.
        biased;
        done = work => Ok(done),
        end = connection.as_mut() => Err(match end {
            Ok(()) => "the connection closed".into(),
            Err(e) => e.to_string(),
        }),
    }
}

/// The last record of each key, in their order: one statement cannot update a row twice, so
/// the last record of a key wins, as it would with one statement per record.
fn last_of_each_key<'a>(
    records: impl IntoIterator<Item = &'a Record>,
    keys: &[String],
) -> Vec<&'a Record> {
    let records: Vec<&Record> = records.into_iter().collect();
    // Keys borrowed from the records, hashed with Fx: a batch's keys are the records' own
    // text, and this runs once per batch on the transaction's path.
    let mut last: FxHashMap<Cow<'a, str>, usize> =
        FxHashMap::with_capacity_and_hasher(records.len(), Default::default());
    for (i, r) in records.iter().enumerate() {
        last.insert(key_of(r, keys), i);
    }
    if last.len() == records.len() {
        // Every key once: all records, already in order.
        return records;
    }
    let mut keep: Vec<usize> = last.into_values().collect();
    keep.sort_unstable();
    keep.into_iter().map(|i| records[i]).collect()
}

/// A server error about the data is the item's fault; a statement or lock timeout is a
/// time-out; anything else (no connection, the server shutting down, a serialization
/// failure or deadlock) is worth retrying.
fn classify(e: &tokio_postgres::Error) -> Failure {
    match e.as_db_error() {
        Some(db) => {
            let code = db.code().code();
            // query_canceled (statement_timeout, or a cancel) and lock_not_available
            // (lock_timeout).
            if code == "57014" || code == "55P03" {
                return Failure::TimedOut(format!("{}: {}", code, db.message()));
            }
            let passing = ["08", "40", "53", "57", "58"]
                .iter()
                .any(|c| code.starts_with(c));
            if passing {
                Failure::Connection(format!("{}: {}", code, db.message()))
            } else {
                Failure::Item(format!("{}: {}", code, db.message()))
            }
        }
        None => Failure::Connection(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_is_its_own_record_trimmed_and_sharing_the_content() {
        let content = Bytes::from_static(b"{\"a\":1}\r\n\n  {\"b\":[2, 3]} \n{\"c\":\"\xc3\xa9\"}");
        let recs = parse_json_lines(&content).unwrap();
        let texts: Vec<&str> = recs.iter().map(Record::json).collect();
        assert_eq!(texts, ["{\"a\":1}", "{\"b\":[2, 3]}", "{\"c\":\"é\"}"]);
        assert_eq!(recs[1].get("b"), Some("[2, 3]"));
        assert_eq!(recs[2].get("c"), Some("\"é\""));
        // Shared, not copied: each record's text lies in the content's buffer.
        let span = content.as_ptr_range();
        assert!(recs.iter().all(|r| span.contains(&r.json().as_ptr())));
    }

    #[test]
    fn json_lines_name_the_bad_line() {
        assert_eq!(
            parse_json_lines(&Bytes::from_static(b"{\"a\":1}\n\n{\"a\":2}\n"))
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            parse_json_lines(&Bytes::from_static(b"{\"a\":1}\n[1]\n"))
                .unwrap_err()
                .line,
            2
        );
        assert_eq!(
            parse_json_lines(&Bytes::from_static(b"{\"a\":1}\n{oops\n"))
                .unwrap_err()
                .line,
            2
        );
    }

    #[test]
    fn a_record_keeps_its_text_and_finds_its_values() {
        let r =
            Record::parse(b" {\"id\":7,\"n\\u0061me\":\"x\\\"y\",\"id\":8,\"o\":{\"a\":[1]}}\r")
                .unwrap();
        assert_eq!(
            r.json(),
            "{\"id\":7,\"n\\u0061me\":\"x\\\"y\",\"id\":8,\"o\":{\"a\":[1]}}"
        );
        assert_eq!(r.columns().collect::<Vec<_>>(), ["id", "name", "id", "o"]);
        // A name written twice: the last value, as jsonb keeps it.
        assert_eq!(r.get("id"), Some("8"));
        assert_eq!(r.get("name"), Some("\"x\\\"y\""));
        assert_eq!(r.get("o"), Some("{\"a\":[1]}"));
        assert_eq!(r.get("missing"), None);
        assert_eq!(Record::parse(b"[1]").unwrap_err(), "not a JSON object");
        assert!(Record::parse(b"{\"a\":1} x").is_err());
        assert!(Record::parse(b"{\"a\":\xff}").is_err());
    }

    #[test]
    fn the_last_record_of_each_key_wins_in_order() {
        let recs = parse_json_lines(&Bytes::from_static(b"{\"k\":1,\"v\":1}\n{\"k\":2,\"v\":2}\n{\"k\":1,\"v\":3}\n{\"v\":4}\n{\"k\":null,\"v\":5}\n"),
        )
        .unwrap();
        let keys = ["k".to_string()];
        let values = |rows: Vec<&Record>| -> Vec<String> {
            rows.iter()
                .map(|r| r.get("v").unwrap().to_string())
                .collect()
        };
        // A missing key and a null key are different keys (the server refuses both later).
        assert_eq!(values(last_of_each_key(&recs, &keys)), ["2", "3", "4", "5"]);
        // Distinct keys: every record, in order.
        assert_eq!(values(last_of_each_key(&recs[..2], &keys)), ["1", "2"]);
        // Two key columns: both must match.
        let recs = parse_json_lines(&Bytes::from_static(
            b"{\"a\":1,\"b\":1,\"v\":1}\n{\"a\":1,\"b\":2,\"v\":2}\n{\"a\":1,\"b\":1,\"v\":3}\n",
        ))
        .unwrap();
        let keys = ["a".to_string(), "b".to_string()];
        assert_eq!(values(last_of_each_key(&recs, &keys)), ["2", "3"]);
    }

    #[test]
    fn keys_written_two_ways_are_one_key() {
        let recs = parse_json_lines(&Bytes::from_static(
            b"{\"k\":\"a\",\"v\":1}\n{\"k\":\"\\u0061\",\"v\":2}\n",
        ))
        .unwrap();
        let keys = ["k".to_string()];
        assert_eq!(key_of(&recs[0], &keys), key_of(&recs[1], &keys));
        let last = last_of_each_key(&recs, &keys);
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].get("v"), Some("2"));
    }

    #[test]
    fn upsert_sql_quotes_and_updates_non_keys() {
        let w = RecordWriter::new(
            PgConfig::new("host=127.0.0.1 dbname=test", None, Some("pw")),
            "public.t",
            StatementType::Upsert {
                keys: vec!["id".into()],
            },
        );
        assert_eq!(
            w.sql(&["id", "na\"me"]),
            "INSERT INTO \"public\".\"t\" (\"id\", \"na\"\"me\") SELECT \"id\", \"na\"\"me\" FROM jsonb_populate_recordset(NULL::\"public\".\"t\", $1) ON CONFLICT (\"id\") DO UPDATE SET \"na\"\"me\" = EXCLUDED.\"na\"\"me\""
        );
        assert!(!format!("{w:?}").contains("pw"));
    }

    #[test]
    fn items_with_the_same_columns_share_one_set_in_the_order_first_met() {
        let lines =
            |text: &'static str| parse_json_lines(&Bytes::from_static(text.as_bytes())).unwrap();
        let items = [
            lines("{\"b\":1,\"a\":2}\n"),
            lines("{\"b\":3,\"a\":4}\n"),
            // The same names in another order: the same set, found by its sorted names.
            lines("{\"a\":5,\"b\":6}\n"),
            lines("{\"c\":7}\n"),
            // Records of one item with different names: the union.
            lines("{\"a\":8}\n{\"c\":9}\n"),
            lines("{}\n"),
            lines("{\"b\":10,\"a\":11}\n"),
        ];
        let mut shapes = Shapes::default();
        let placed: Vec<Option<usize>> = items.iter().map(|r| shapes.place(r)).collect();
        assert_eq!(
            placed,
            [Some(0), Some(0), Some(0), Some(1), Some(2), None, Some(0)]
        );
        assert_eq!(shapes.sets, [vec!["a", "b"], vec!["c"], vec!["a", "c"]]);
        let w = RecordWriter::new(
            PgConfig::new("host=127.0.0.1", None, None),
            "t",
            StatementType::Insert,
        );
        // The writer places each item's set as it prepares it, and merges each item into the
        // statement of its set.
        let mut shapes = Shapes::default();
        let prepared: Vec<(usize, Prepared)> = items
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i, w.prepare_item(r, &mut shapes).unwrap()?)))
            .collect();
        assert_eq!(
            prepared.len(),
            items.len() - 1,
            "`{{}}` has nothing to write"
        );
        let merged = w.merge(&shapes, &prepared);
        let texts: Vec<(Vec<&str>, Vec<&str>)> = merged
            .iter()
            .map(|(c, rows)| (c.to_vec(), rows.iter().map(|r| r.json()).collect()))
            .collect();
        assert_eq!(
            texts,
            [
                (
                    vec!["a", "b"],
                    vec![
                        "{\"b\":1,\"a\":2}",
                        "{\"b\":3,\"a\":4}",
                        "{\"a\":5,\"b\":6}",
                        "{\"b\":10,\"a\":11}"
                    ]
                ),
                (vec!["c"], vec!["{\"c\":7}"]),
                (vec!["a", "c"], vec!["{\"a\":8}", "{\"c\":9}"]),
            ]
        );
    }

    #[test]
    fn upsert_keeps_the_last_record_of_a_key_and_refuses_a_missing_key() {
        let w = RecordWriter::new(
            PgConfig::new("host=127.0.0.1", None, None),
            "t",
            StatementType::Upsert {
                keys: vec!["id".into()],
            },
        );
        let recs = parse_json_lines(&Bytes::from_static(
            b"{\"id\":1,\"v\":\"a\"}\n{\"id\":2,\"v\":\"b\"}\n{\"id\":1,\"v\":\"c\"}\n",
        ))
        .unwrap();
        let mut shapes = Shapes::default();
        let p = w.prepare_item(&recs, &mut shapes).unwrap().unwrap();
        assert_eq!(p.count, 2);
        assert_eq!(p.rows.iter().nth(1).unwrap().get("v"), Some("\"c\""));
        let bad = parse_json_lines(&Bytes::from_static(b"{\"v\":1}\n")).unwrap();
        assert!(
            w.prepare_item(&bad, &mut shapes)
                .unwrap_err()
                .contains("key column `id`")
        );
    }
}
