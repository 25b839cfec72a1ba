//! LogAttribute: its spec and its processor.

use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BATCH, BuiltIn};
use super::{BuildError, ProcessError, Processor, Trigger, props};
use std::sync::Arc;
use weir_flow_api::component::Component;
use weir_flow_api::session::Session;

/// The LogAttribute type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(LogAttribute::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "LogAttribute",
    description: "Logs each flow file's attributes (and optionally its content).",
    properties: &[
        p(
            "Log Level",
            true,
            Some("info"),
            K::Choice(&["trace", "debug", "info", "warn", "error"]),
        )
        .about("The level of the log line (written when `WEIR_LOG` lets that level through)."),
        p("Log Payload", true, Some("false"), K::Bool)
            .about("Also log the content, as text (bytes that are not UTF-8 replaced)."),
    ],
    relationships: &["success"],
    dynamic: Dynamic::None,
    source: false,
};

/// LogAttribute: logs each flow file's attributes (and payload) with `tracing`.
pub struct LogAttribute {
    level: tracing::Level,
    payload: bool,
}

impl LogAttribute {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let level = props::text(c, "Log Level")
            .parse()
            .map_err(|_| "Log Level: unknown level".to_string())?;
        Ok(LogAttribute {
            level,
            payload: props::boolean(c, "Log Payload"),
        })
    }
}

impl Processor for LogAttribute {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        for &ff in &ffs {
            // `fileSize` first, as NiFi's LogAttribute lists the standard attributes before
            // the map (which does not hold it).
            let f = session.flowfile(ff);
            let attrs = format!("fileSize={} {:?}", f.size(), f.attributes);
            let payload = if self.payload {
                String::from_utf8_lossy(&session.read(ff)?).into_owned()
            } else {
                String::new()
            };
            let name = session.component_name().to_string();
            match self.level {
                tracing::Level::ERROR => tracing::error!(component = %name, "{attrs} {payload}"),
                tracing::Level::WARN => tracing::warn!(component = %name, "{attrs} {payload}"),
                tracing::Level::INFO => tracing::info!(component = %name, "{attrs} {payload}"),
                tracing::Level::DEBUG => tracing::debug!(component = %name, "{attrs} {payload}"),
                tracing::Level::TRACE => tracing::trace!(component = %name, "{attrs} {payload}"),
            }
            session.transfer(ff, "success")?;
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}
