//! PutDatabaseRecord: its spec and its processor.

use super::BuiltIn;
use super::brokers::runtime;
use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BuildError, ProcessError, Processor, Trigger, props};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::runtime::Handle;
use weir_connectors::postgres::{
    ItemOutcome, PgConfig, PgTimeouts, RecordWriter, StatementType, parse_json_lines,
};
use weir_flow_api::component::Component;
use weir_flow_api::flowfile::SmolStr;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::{CommitRefused, Completion, Session};

/// The PutDatabaseRecord type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(PutDatabaseRecord::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "PutDatabaseRecord",
    description: "Inserts or upserts the records of each flow file's content (JSON Lines, one object per line) into a PostgreSQL table; a flow file with a bad record goes to failure, one the database could not take now to retry.",
    properties: &[
        p("Database URL", true, None, K::Text).about(
            "The PostgreSQL connection string (`postgres://host:5432/db` or `host=... dbname=...`).",
        ),
        p("Table Name", true, None, K::Text).about("The table the records go into."),
        p(
            "Statement Type",
            true,
            Some("INSERT"),
            K::Choice(&["INSERT", "UPSERT"]),
        ).about(
            "`INSERT` each record, or `UPSERT`: insert, or update the row with the same Update Keys.",
        ),
        p("Update Keys", false, None, K::Text).about(
            "The key columns of an UPSERT, comma-separated (required then; a unique index must cover them).",
        ),
        p("User Name", false, None, K::Text).about("The database user, instead of the URL's."),
        p("Password", false, None, K::Text).about(
            "The user's password, instead of the URL's (it appears in no log line and no attribute).",
        ),
        p("Batch Size", true, Some("100"), K::Count).about(
            "The most flow files written per trigger, in one database transaction (0 counts as 1).",
        ),
        p("Connect Timeout", true, Some("10 sec"), K::Duration).about(
            "How long connecting to the database may take (in a stateless group, at most the group's timeout).",
        ),
        p("Statement Timeout", true, Some("30 sec"), K::Duration).about(
            "How long one statement may run on the server (in a stateless group, at most the group's timeout).",
        ),
        p("Lock Timeout", true, Some("10 sec"), K::Duration).about(
            "How long a statement may wait for a lock (in a stateless group, at most the group's timeout).",
        ),
    ],
    relationships: &["success", "failure", "retry"],
    dynamic: Dynamic::None,
    source: false,
};

pub(super) struct PutDatabaseRecord {
    name: String,
    /// In a stateless group: a call that times out fails the trigger, so that the group
    /// rolls back (the database's transaction is gone) and the broker redelivers.
    stateless: bool,
    batch: usize,
    /// The SEND events' transit URI, shared by every event.
    uri: SmolStr,
    runtime: Handle,
    writer: Arc<tokio::sync::Mutex<RecordWriter>>,
    last_bulletin: Mutex<Option<String>>,
}

impl PutDatabaseRecord {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let (connect, statement) = (
            props::duration(c, "Connect Timeout")?,
            props::duration(c, "Statement Timeout")?,
        );
        let mut timeouts = PgTimeouts {
            connect,
            statement,
            lock: props::duration(c, "Lock Timeout")?,
            // The client's own bound: a server or network that stops answering cannot hold
            // the call past what the server's timeouts allow, and a little more.
            call: connect + statement + Duration::from_secs(1),
        };
        if let Some(limit) = c.group_timeout {
            // A blocked call ends within the group's timeout, which is checked only between
            // triggers.
            timeouts = timeouts.capped(limit);
        }
        let config = PgConfig::new(
            &props::text(c, "Database URL"),
            props::opt(c, "User Name").as_deref(),
            props::opt(c, "Password").as_deref(),
        )
        .with_timeouts(timeouts);
        let table = props::text(c, "Table Name");
        let statement = if props::text(c, "Statement Type").eq_ignore_ascii_case("UPSERT") {
            StatementType::Upsert {
                keys: props::text(c, "Update Keys")
                    .split(',')
                    .map(|k| k.trim().to_string())
                    .filter(|k| !k.is_empty())
                    .collect(),
            }
        } else {
            StatementType::Insert
        };
        Ok(PutDatabaseRecord {
            name: c.name.clone(),
            stateless: c.group_timeout.is_some(),
            batch: props::count(c, "Batch Size")?.max(1) as usize,
            uri: format!("{config}/{table}").into(),
            runtime: runtime()?,
            writer: Arc::new(tokio::sync::Mutex::new(RecordWriter::new(
                config, &table, statement,
            ))),
            last_bulletin: Mutex::new(None),
        })
    }
}

impl PutDatabaseRecord {
    /// Ties the open database transaction to the group's: committed as the group commits,
    /// before its journal frame and before any source acknowledges
    /// ([`Session::before_commit`]: a failed COMMIT rolls the group back and the brokers
    /// redeliver), rolled back when it rolls back. Every trigger registers both; the first to
    /// run settles the transaction and the others find nothing open.
    fn settle_with_group(&self, session: &mut dyn Session) {
        let (writer, runtime, name) = (
            Arc::clone(&self.writer),
            self.runtime.clone(),
            self.name.clone(),
        );
        session.before_commit(move || {
            runtime
                .block_on(async { writer.lock().await.commit().await })
                .map_err(|e| CommitRefused::new(format!("{name}: COMMIT"), e))
        });
        let (writer, runtime) = (Arc::clone(&self.writer), self.runtime.clone());
        session.on_complete(move |outcome| {
            if let Completion::RolledBack { .. } = outcome {
                runtime.block_on(async { writer.lock().await.rollback().await });
            }
        });
    }
}

impl Processor for PutDatabaseRecord {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(self.batch)?;
        if ffs.is_empty() {
            return Ok(Trigger::Idle);
        }
        let mut items = Vec::with_capacity(ffs.len());
        let mut sent = Vec::with_capacity(ffs.len());
        for &ff in &ffs {
            match parse_json_lines(&session.read(ff)?) {
                Ok(records) => {
                    items.push(records);
                    sent.push(ff);
                }
                Err(e) => {
                    session.put_attribute(ff, "putdatabaserecord.error", e.to_string());
                    session.transfer(ff, "failure")?;
                }
            }
        }
        let writer = Arc::clone(&self.writer);
        let outcomes = if self.stateless {
            self.settle_with_group(session);
            // In the group's open database transaction: committed when the group commits.
            let outcomes = session.wait(&self.runtime, async move {
                writer.lock().await.write_in_transaction(&items).await
            });
            // The open transaction is lost with what the group wrote in it before: the
            // whole group rolls back and the broker redelivers.
            if let Some(ItemOutcome::TimedOut(e) | ItemOutcome::Retry(e)) = outcomes
                .iter()
                .find(|o| matches!(o, ItemOutcome::TimedOut(_) | ItemOutcome::Retry(_)))
            {
                return Err(ProcessError::Other(format!(
                    "the database transaction failed: {e}"
                )));
            }
            outcomes
        } else {
            session.wait(&self.runtime, async move {
                writer.lock().await.write_batch(&items).await
            })
        };
        let mut retry = None;
        for (ff, outcome) in sent.into_iter().zip(outcomes) {
            match outcome {
                // As NiFi's: a written flow file gains no attribute (the SEND event records
                // it), only a failed one `putdatabaserecord.error`.
                ItemOutcome::Written(_) => {
                    // In a stateless group the rows roll back with it: no SEND then.
                    session.report_on_commit(ff, EventType::SEND, Some(self.uri.clone()), None);
                    session.transfer(ff, "success")?;
                }
                ItemOutcome::Bad(e) => {
                    session.put_attribute(ff, "putdatabaserecord.error", e);
                    session.transfer(ff, "failure")?;
                }
                ItemOutcome::Retry(e) | ItemOutcome::TimedOut(e) => {
                    session.penalize(ff);
                    session.transfer(ff, "retry")?;
                    retry = Some(e);
                }
            }
        }
        if let Some(e) = retry {
            let mut last = self.last_bulletin.lock().unwrap_or_else(|p| p.into_inner());
            if last.as_deref() != Some(e.as_str()) {
                tracing::warn!(
                    "{}: database unavailable ({e}); flow files to retry",
                    self.name
                );
                *last = Some(e);
            }
        }
        Ok(Trigger::Worked)
    }
}
