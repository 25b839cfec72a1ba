//! Attribute processors: UpdateAttribute, RouteOnAttribute, LogAttribute, and the
//! pass-through of ports and funnels.

use super::{BuildError, ProcessError, Processor, Trigger, eval, props};
use crate::processors::spec::Dynamic;
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::flowfile::SmolStr;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::Session;

/// How many flow files one trigger of a per-flow-file processor takes.
const BATCH: usize = 100;

/// RouteOnAttribute's attribute of the relationship chosen.
const ROUTE: SmolStr = SmolStr::new_static("RouteOnAttribute.Route");

/// Ports and funnels: every flow file goes on to `success`.
pub struct PassThrough;

impl Processor for PassThrough {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        for &ff in &ffs {
            session.transfer(ff, "success")?;
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}

/// A component's dynamic properties, each name with its value parsed. Names are held as
/// [`SmolStr`]s: an attribute set by name shares it instead of copying it per flow file.
fn dynamic_templates(c: &Component) -> Result<Vec<(SmolStr, Template)>, String> {
    let spec = match c.kind {
        weir_flow_api::component::ComponentKind::Processor(s) => s,
        weir_flow_api::component::ComponentKind::Port => return Ok(vec![]),
    };
    let mut out = Vec::new();
    for (name, value) in &c.properties {
        if spec.property(name).is_none() && spec.dynamic != Dynamic::None {
            out.push((
                SmolStr::new(name),
                Template::parse(value).map_err(|e| format!("{name}: {e}"))?,
            ));
        }
    }
    Ok(out)
}

/// UpdateAttribute: each extra property sets the attribute of its name to its value.
pub struct UpdateAttribute {
    rules: Vec<(SmolStr, Template)>,
}

impl UpdateAttribute {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        Ok(UpdateAttribute {
            rules: dynamic_templates(c)?,
        })
    }
}

impl Processor for UpdateAttribute {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        // One vector for the batch, emptied per flow file.
        let mut values = Vec::with_capacity(self.rules.len());
        for &ff in &ffs {
            // Every value is computed from the attributes before the update, as in NiFi.
            let mut failed = None;
            for (name, t) in &self.rules {
                match eval(t, session, ff) {
                    // Made a name's value now: the text may borrow the flow file's map.
                    Ok(v) => values.push((name, SmolStr::new(v))),
                    Err(e) => failed = Some(e),
                }
            }
            if let Some(e) = failed {
                // UpdateAttribute has only `success`: a failing expression is the processor's
                // failure (rolled back and penalized).
                return Err(ProcessError::Other(e.to_string()));
            }
            for (name, v) in values.drain(..) {
                session.put_attribute(ff, name.clone(), v);
            }
            session.transfer(ff, "success")?;
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Strategy {
    PropertyName,
    All,
    Any,
}

/// RouteOnAttribute: boolean expressions choose the relationship.
pub struct RouteOnAttribute {
    routes: Vec<(SmolStr, Template)>,
    strategy: Strategy,
}

impl RouteOnAttribute {
    pub(super) fn new(c: &Component) -> Result<Self, BuildError> {
        let strategy = match props::text(c, "Routing Strategy").as_str() {
            "Route to 'matched' if all match" => Strategy::All,
            "Route to 'matched' if any matches" => Strategy::Any,
            _ => Strategy::PropertyName,
        };
        Ok(RouteOnAttribute {
            routes: dynamic_templates(c)?,
            strategy,
        })
    }
}

impl Processor for RouteOnAttribute {
    fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
        let ffs = session.get_batch(BATCH)?;
        // One vector for the batch, emptied per flow file.
        let mut matched: Vec<&str> = Vec::with_capacity(self.routes.len());
        for &ff in &ffs {
            matched.clear();
            for (name, t) in &self.routes {
                let f = session.flowfile(ff);
                let yes = t.evaluate_bool(&|k| f.attribute(k)).unwrap_or(false);
                if yes {
                    matched.push(name);
                }
            }
            // Relationship names are short: held inline, so the attribute and the event
            // share no allocation.
            let rel = SmolStr::new(match self.strategy {
                Strategy::PropertyName => matched.first().copied().unwrap_or("unmatched"),
                Strategy::All if !self.routes.is_empty() && matched.len() == self.routes.len() => {
                    "matched"
                }
                Strategy::Any if !matched.is_empty() => "matched",
                _ => "unmatched",
            });
            session.put_attribute(ff, ROUTE, rel.clone());
            session.report(ff, EventType::ROUTE, None, Some(rel.clone()));
            session.transfer(ff, &rel)?;
        }
        Ok(Trigger::worked_if(!ffs.is_empty()))
    }
}

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
