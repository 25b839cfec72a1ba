//! RouteOnAttribute: its spec and its processor.

use super::spec::{Dynamic, K, ProcessorSpec, p};
use super::{BATCH, BuiltIn, dynamic_templates};
use super::{BuildError, ProcessError, Processor, Trigger, props};
use std::sync::Arc;
use weir_flow_api::component::Component;
use weir_flow_api::expression::Template;
use weir_flow_api::flowfile::SmolStr;
use weir_flow_api::provenance::EventType;
use weir_flow_api::session::Session;

/// The RouteOnAttribute type: what it accepts and how it is built.
pub(super) static BUILT_IN: BuiltIn = BuiltIn {
    spec: &SPEC,
    build: |c| Ok(Arc::new(RouteOnAttribute::new(c)?)),
};

static SPEC: ProcessorSpec = ProcessorSpec {
    kind: "RouteOnAttribute",
    description: "Routes each flow file by boolean expressions over its attributes.",
    properties: &[p(
        "Routing Strategy",
        true,
        Some("Route to Property name"),
        K::Choice(&[
            "Route to Property name",
            "Route to 'matched' if all match",
            "Route to 'matched' if any matches",
        ]),
    ).about(
        "`Route to Property name` sends a flow file to the first dynamic property (by name) that is true, the `matched` strategies to `matched` when all or any of them are true; otherwise it goes to `unmatched`.",
    )],
    relationships: &["unmatched"],
    dynamic: Dynamic::Routes,
    source: false,
};

/// RouteOnAttribute's attribute of the relationship chosen.
const ROUTE: SmolStr = SmolStr::new_static("RouteOnAttribute.Route");

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
