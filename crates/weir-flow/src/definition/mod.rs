//! Flow definitions: the YAML format of `docs/flows.md` at the repository root, read with `serde_yaml_ng`
//! and validated into a [`Flow`] before anything runs.
//!
//! ```
//! let yaml = r#"
//! flow: demo
//! groups:
//!   - name: main
//!     processors:
//!       - name: gen
//!         type: GenerateFlowFile
//!         properties: { File Size: 10 B }
//!       - name: log
//!         type: LogAttribute
//!         auto_terminate: [success]
//!     connections:
//!       - { from: gen, relationships: [success], to: log }
//! "#;
//! let flow = weir_flow::definition::Flow::parse(yaml, "demo.yaml").unwrap();
//! assert_eq!(flow.processors.len(), 2);
//! assert_eq!(flow.connections[0].back_pressure_count, 10_000);
//! ```
//!
//! Every error names the file, the line and the field at fault; see [`ValidationError`].

mod locate;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use crate::expression::Template;
use crate::processors::registry::ProcessorRegistry;
use crate::processors::spec::{Dynamic, PropertyKind};
use locate::Locator;
pub use weir_flow_api::component::{Component, ComponentKind, Schedule};
pub use weir_flow_api::units;
use weir_flow_api::units::{parse_duration, parse_size};

/// One thing wrong with a definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// The definition file, as given.
    pub file: String,
    /// 1-based line, when it could be placed.
    pub line: Option<usize>,
    /// The field at fault, as a path (`groups[0].processors[1].properties.Directory`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(
                f,
                "{}:{}: {}: {}",
                self.file, line, self.field, self.message
            ),
            None => write!(f, "{}: {}: {}", self.file, self.field, self.message),
        }
    }
}

/// Every error found in one definition (validation does not stop at the first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationErrors(pub Vec<ValidationError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

// ---- the YAML, as written ----

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDef {
    flow: String,
    #[serde(default)]
    settings: SettingsDef,
    groups: Vec<GroupDef>,
    #[serde(default)]
    connections: Vec<ConnectionDef>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsDef {
    sync: Option<String>,
    sync_interval: Option<String>,
    checkpoint_interval: Option<String>,
    provenance_max_age: Option<String>,
    provenance_max_size: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupDef {
    name: String,
    engine: Option<String>,
    concurrency: Option<u32>,
    timeout: Option<String>,
    #[serde(default)]
    processors: Vec<ProcessorDef>,
    #[serde(default)]
    connections: Vec<ConnectionDef>,
    #[serde(default)]
    ports: PortsDef,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProcessorDef {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    schedule: Option<ScheduleDef>,
    concurrency: Option<u32>,
    run_duration: Option<String>,
    penalty: Option<String>,
    #[serde(rename = "yield")]
    yield_duration: Option<String>,
    #[serde(default)]
    properties: BTreeMap<String, String>,
    #[serde(default)]
    auto_terminate: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleDef {
    strategy: String,
    period: Option<String>,
    expression: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectionDef {
    from: String,
    relationships: Option<Vec<String>>,
    to: String,
    back_pressure: Option<BackPressureDef>,
    prioritizers: Option<Vec<String>>,
    swap_threshold: Option<usize>,
    expiration: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BackPressureDef {
    count: Option<u64>,
    size: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PortsDef {
    #[serde(default)]
    input: Vec<String>,
    #[serde(default)]
    output: Vec<OutputPortDef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputPortDef {
    name: String,
    #[serde(default)]
    failure: bool,
}

// ---- the validated flow ----

/// How the flow-file repository syncs its journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Group commit: a session's commit returns once its frame is on disk.
    Always,
    /// Frames are written at once and synced every interval.
    Interval(Duration),
    /// Frames are written, never synced (the OS decides).
    None,
}

/// Repository and provenance settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The journal's sync policy.
    pub sync: SyncPolicy,
    /// How often the flow-file repository is checkpointed (NiFi: 2 min).
    pub checkpoint_interval: Duration,
    /// Provenance events older than this are removed (NiFi: 24 h).
    pub provenance_max_age: Duration,
    /// Provenance is trimmed, oldest first, above this many bytes (NiFi: 10 GB; here 1 GB).
    pub provenance_max_size: u64,
}

/// How a queue orders its flow files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Prioritizer {
    /// Enqueue order.
    FirstInFirstOut,
    /// Smallest `entryDate` first.
    OldestFlowFileFirst,
    /// Largest `entryDate` first.
    NewestFlowFileFirst,
    /// The `priority` attribute: smaller numbers first, then text, missing last.
    PriorityAttribute,
}

/// One connection (queue), validated.
#[derive(Debug, Clone)]
pub struct Connection {
    /// A stable name: `FROM[rel,rel]->TO`. Queued flow files are recovered by it.
    pub key: String,
    /// Index of the upstream component.
    pub from: usize,
    /// Relationships it carries.
    pub relationships: Vec<String>,
    /// Index of the downstream component.
    pub to: usize,
    /// Back pressure at this many queued flow files.
    pub back_pressure_count: u64,
    /// Back pressure at this many queued bytes.
    pub back_pressure_size: u64,
    /// Ordering, first rule first.
    pub prioritizers: Vec<Prioritizer>,
    /// Flow files in memory before the lowest-priority ones swap to disk.
    pub swap_threshold: usize,
    /// Flow files older than this are dropped (zero: never).
    pub expiration: Duration,
}

/// A validated flow, ready to run.
#[derive(Debug, Clone)]
pub struct Flow {
    /// The flow's name.
    pub name: String,
    /// Repository settings.
    pub settings: Settings,
    /// Processors and ports.
    pub processors: Vec<Component>,
    /// Queues between them.
    pub connections: Vec<Connection>,
    /// Groups marked `engine: stateless` (run by the stateless engine, not this one).
    pub stateless_groups: Vec<String>,
    /// Custom processor types the flow was validated with; the engine builds them.
    pub registry: ProcessorRegistry,
    /// The settings of each stateless group, in the order of `stateless_groups`.
    pub stateless: Vec<StatelessGroup>,
}

/// A group marked `engine: stateless`: one transaction per trigger, run by
/// [`crate::stateless`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatelessGroup {
    /// The group's name.
    pub name: String,
    /// Independent copies of the group, each with its own processor state (default 1).
    pub concurrency: usize,
    /// A transaction not done in this time rolls back (default 1 min).
    pub timeout: Duration,
}

struct Checker<'a> {
    file: &'a str,
    errors: Vec<ValidationError>,
    registry: &'a ProcessorRegistry,
}

impl Checker<'_> {
    fn error(&mut self, line: Option<usize>, field: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ValidationError {
            file: self.file.to_string(),
            line,
            field: field.into(),
            message: message.into(),
        });
    }

    fn duration(
        &mut self,
        text: Option<&String>,
        default: Duration,
        line: Option<usize>,
        field: String,
    ) -> Duration {
        match text {
            None => default,
            Some(t) => parse_duration(t).unwrap_or_else(|e| {
                self.error(line, field, e.to_string());
                default
            }),
        }
    }
}

impl Flow {
    /// Reads and validates a definition file.
    ///
    /// # Errors
    /// [`ValidationErrors`] with every problem found; a file that cannot be read is one error
    /// with no line.
    pub fn load(path: &std::path::Path) -> Result<Flow, ValidationErrors> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ValidationErrors(vec![ValidationError {
                file: name.clone(),
                line: None,
                field: "(file)".into(),
                message: format!("cannot read: {e}"),
            }])
        })?;
        Flow::parse(&text, &name)
    }

    /// Parses and validates `text`; `file` names it in errors.
    ///
    /// # Errors
    /// [`ValidationErrors`] with every problem found.
    pub fn parse(text: &str, file: &str) -> Result<Flow, ValidationErrors> {
        Flow::parse_with(text, file, &ProcessorRegistry::default())
    }

    /// As [`Flow::parse`], with the custom processor types of `registry` besides the
    /// built-in ones; the flow keeps the registry so that the engine can build them.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use weir_flow::definition::Flow;
    /// use weir_flow::engine::Session;
    /// use weir_flow::processors::registry::ProcessorRegistry;
    /// use weir_flow::processors::spec::{Dynamic, ProcessorSpec};
    /// use weir_flow::processors::{ProcessError, Processor, Trigger};
    ///
    /// /// Drops every flow file it gets.
    /// struct Sink;
    /// impl Processor for Sink {
    ///     fn trigger(&self, session: &mut dyn Session) -> Result<Trigger, ProcessError> {
    ///         let Some(ff) = session.get()? else { return Ok(Trigger::Idle) };
    ///         session.remove(ff);
    ///         Ok(Trigger::Worked)
    ///     }
    /// }
    /// static SINK: ProcessorSpec = ProcessorSpec {
    ///     kind: "Sink",
    ///     description: "A test processor.",
    ///     properties: &[],
    ///     relationships: &[],
    ///     dynamic: Dynamic::None,
    ///     source: false,
    /// };
    /// let mut registry = ProcessorRegistry::default();
    /// registry.register(&SINK, |_| Ok(Arc::new(Sink))).unwrap();
    /// let yaml = "flow: f\ngroups:\n  - name: g\n    processors:\n      - { name: gen, type: GenerateFlowFile }\n      - { name: sink, type: Sink }\n    connections:\n      - { from: gen, relationships: [success], to: sink }\n";
    /// let flow = Flow::parse_with(yaml, "f.yaml", &registry).unwrap();
    /// assert_eq!(flow.processors[1].type_name(), "Sink");
    /// ```
    ///
    /// # Errors
    /// [`ValidationErrors`] with every problem found.
    pub fn parse_with(
        text: &str,
        file: &str,
        registry: &ProcessorRegistry,
    ) -> Result<Flow, ValidationErrors> {
        let def: FileDef = serde_yaml_ng::from_str(text).map_err(|e| {
            let line = e.location().map(|l| l.line());
            let message = e.to_string();
            // serde_yaml_ng prefixes the path of the field: `groups[0].processors[1]: ...`.
            let (field, message) = match message.split_once(": ") {
                Some((path, rest)) if !path.contains(' ') => (path.to_string(), rest.to_string()),
                _ => ("(document)".to_string(), message),
            };
            let message = message
                .rsplit_once(" at line ")
                .map_or(message.clone(), |(m, _)| m.to_string());
            ValidationErrors(vec![ValidationError {
                file: file.to_string(),
                line,
                field,
                message,
            }])
        })?;
        let locator = Locator::new(text);
        let mut c = Checker {
            file,
            errors: Vec::new(),
            registry,
        };
        let flow = build(def, &locator, &mut c);
        if c.errors.is_empty() {
            Ok(flow)
        } else {
            c.errors.sort_by_key(|e| e.line.unwrap_or(0));
            Err(ValidationErrors(c.errors))
        }
    }

    /// Index of the component named `name`.
    pub fn component(&self, name: &str) -> Option<usize> {
        self.processors.iter().position(|p| p.name == name)
    }
}

fn build(def: FileDef, loc: &Locator, c: &mut Checker<'_>) -> Flow {
    let settings = settings(&def.settings, loc, c);
    let mut processors: Vec<Component> = Vec::new();
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut stateless_groups = Vec::new();
    let mut stateless_settings = Vec::new();
    // (group index, connection def, group name or None for top level)
    let mut pending: Vec<(String, ConnectionDef, Option<usize>, Option<String>)> = Vec::new();
    let mut group_names = BTreeSet::new();
    let mut group_line = Some(1);
    for (gi, group) in def.groups.into_iter().enumerate() {
        group_line = loc.value_line("name", &group.name, group_line.unwrap_or(1));
        let gfield = format!("groups[{gi}]");
        if !group_names.insert(group.name.clone()) {
            c.error(
                group_line,
                format!("{gfield}.name"),
                format!("duplicate group `{}`", group.name),
            );
        }
        let stateless = match group.engine.as_deref() {
            None | Some("traditional") => false,
            Some("stateless") => true,
            Some(other) => {
                c.error(
                    loc.key_line("engine", group_line),
                    format!("{gfield}.engine"),
                    format!("unknown engine `{other}` (traditional or stateless)"),
                );
                false
            }
        };
        let mut group_timeout = None;
        if stateless {
            stateless_groups.push(group.name.clone());
            let timeout = c.duration(
                group.timeout.as_ref(),
                Duration::from_secs(60),
                loc.key_line("timeout", group_line),
                format!("{gfield}.timeout"),
            );
            if group.concurrency == Some(0) {
                c.error(
                    loc.key_line("concurrency", group_line),
                    format!("{gfield}.concurrency"),
                    "must be at least 1",
                );
            }
            group_timeout = Some(timeout);
            stateless_settings.push(StatelessGroup {
                name: group.name.clone(),
                concurrency: group.concurrency.unwrap_or(1).max(1) as usize,
                timeout,
            });
        } else {
            for (key, present) in [
                ("concurrency", group.concurrency.is_some()),
                ("timeout", group.timeout.is_some()),
            ] {
                if present {
                    c.error(
                        loc.key_line(key, group_line),
                        format!("{gfield}.{key}"),
                        "only a stateless group has this setting",
                    );
                }
            }
        }
        let mut proc_line = group_line;
        for (pi, pd) in group.processors.into_iter().enumerate() {
            proc_line = loc
                .value_line("name", &pd.name, proc_line.unwrap_or(1))
                .or(proc_line);
            let field = format!("{gfield}.processors[{pi}]");
            let component = processor(pd, &group.name, group_timeout, proc_line, &field, loc, c);
            if let Some(component) = component {
                if names.contains_key(&component.name) {
                    c.error(
                        proc_line,
                        format!("{field}.name"),
                        format!("duplicate component name `{}`", component.name),
                    );
                }
                names.insert(component.name.clone(), processors.len());
                processors.push(component);
            }
        }
        let ports_line = loc.key_line("ports", group_line);
        let port_names = group
            .ports
            .input
            .iter()
            .map(|name| (name.clone(), false))
            .chain(
                group
                    .ports
                    .output
                    .iter()
                    .map(|o| (o.name.clone(), o.failure)),
            );
        for (port, failure_port) in port_names {
            let name = format!("{}/{port}", group.name);
            names.insert(name.clone(), processors.len());
            processors.push(Component {
                name,
                group: group.name.clone(),
                kind: ComponentKind::Port,
                properties: BTreeMap::new(),
                schedule: Schedule::Timer(Duration::ZERO),
                concurrency: 1,
                run_duration: Duration::ZERO,
                penalty: Duration::from_secs(30),
                yield_duration: Duration::from_secs(1),
                auto_terminate: BTreeSet::new(),
                relationships: vec!["success".into()],
                failure_port,
                group_timeout,
                line: ports_line,
            });
        }
        let mut conn_line = loc.key_line("connections", group_line);
        for (ci, cd) in group.connections.into_iter().enumerate() {
            conn_line = loc.key_line("from", conn_line.map(|l| l + 1)).or(conn_line);
            pending.push((
                format!("{gfield}.connections[{ci}]"),
                cd,
                conn_line,
                Some(group.name.clone()),
            ));
        }
    }
    let mut top_line = loc.top_level_key_line("connections");
    for (ci, cd) in def.connections.into_iter().enumerate() {
        top_line = loc.key_line("from", top_line.map(|l| l + 1)).or(top_line);
        pending.push((format!("connections[{ci}]"), cd, top_line, None));
    }
    let mut connections = Vec::new();
    let mut connected: BTreeSet<(usize, String)> = BTreeSet::new();
    for (field, cd, line, group) in pending {
        let resolve = |name: &str| -> Option<usize> {
            match &group {
                // Inside a group a port is named without its group.
                Some(g) => names
                    .get(&format!("{g}/{name}"))
                    .or_else(|| names.get(name))
                    .copied(),
                None => names.get(name).copied(),
            }
        };
        let from = resolve(&cd.from);
        let to = resolve(&cd.to);
        if from.is_none() {
            c.error(
                line,
                format!("{field}.from"),
                format!("unknown component `{}`", cd.from),
            );
        }
        if to.is_none() {
            c.error(
                line,
                format!("{field}.to"),
                format!("unknown component `{}`", cd.to),
            );
        }
        let (Some(from), Some(to)) = (from, to) else {
            continue;
        };
        let relationships = match cd.relationships {
            Some(r) if !r.is_empty() => r,
            _ => {
                if matches!(processors[from].kind, ComponentKind::Port)
                    || processors[from].type_name() == "Funnel"
                {
                    vec!["success".to_string()]
                } else {
                    c.error(
                        line,
                        format!("{field}.relationships"),
                        "missing: name the relationships this connection carries",
                    );
                    continue;
                }
            }
        };
        for rel in &relationships {
            if !processors[from].relationships.contains(rel) {
                c.error(
                    line,
                    format!("{field}.relationships"),
                    format!(
                        "`{}` ({}) has no relationship `{rel}` (it has: {})",
                        processors[from].name,
                        processors[from].type_name(),
                        processors[from].relationships.join(", ")
                    ),
                );
            }
            connected.insert((from, rel.clone()));
        }
        let (mut count, mut size) = (10_000, 1 << 30);
        if let Some(bp) = &cd.back_pressure {
            count = bp.count.unwrap_or(count);
            if let Some(s) = &bp.size {
                size = parse_size(s).unwrap_or_else(|e| {
                    c.error(line, format!("{field}.back_pressure.size"), e.to_string());
                    size
                });
            }
        }
        let mut prioritizers = Vec::new();
        for name in cd.prioritizers.unwrap_or_default() {
            let p = match name.as_str() {
                "FirstInFirstOut" | "FirstInFirstOutPrioritizer" => Prioritizer::FirstInFirstOut,
                "OldestFlowFileFirst" | "OldestFlowFileFirstPrioritizer" => {
                    Prioritizer::OldestFlowFileFirst
                }
                "NewestFlowFileFirst" | "NewestFlowFileFirstPrioritizer" => {
                    Prioritizer::NewestFlowFileFirst
                }
                "PriorityAttribute" | "PriorityAttributePrioritizer" => {
                    Prioritizer::PriorityAttribute
                }
                other => {
                    c.error(
                        line,
                        format!("{field}.prioritizers"),
                        format!("unknown prioritizer `{other}` (FirstInFirstOut, OldestFlowFileFirst, NewestFlowFileFirst, PriorityAttribute)"),
                    );
                    continue;
                }
            };
            prioritizers.push(p);
        }
        let expiration = c.duration(
            cd.expiration.as_ref(),
            Duration::ZERO,
            line,
            format!("{field}.expiration"),
        );
        let swap_threshold = cd.swap_threshold.unwrap_or(20_000);
        if swap_threshold == 0 {
            c.error(
                line,
                format!("{field}.swap_threshold"),
                "must be at least 1",
            );
        }
        connections.push(Connection {
            key: format!(
                "{}[{}]->{}",
                processors[from].name,
                relationships.join(","),
                processors[to].name
            ),
            from,
            relationships,
            to,
            back_pressure_count: count,
            back_pressure_size: size,
            prioritizers,
            swap_threshold: swap_threshold.max(1),
            expiration,
        });
    }
    for (i, p) in processors.iter().enumerate() {
        if matches!(p.kind, ComponentKind::Port) {
            continue;
        }
        for rel in &p.relationships {
            if !connected.contains(&(i, rel.clone())) && !p.auto_terminate.contains(rel) {
                c.error(
                    p.line,
                    format!("processor `{}`", p.name),
                    format!("relationship `{rel}` is neither connected nor in auto_terminate"),
                );
            }
        }
    }
    let mut keys = BTreeSet::new();
    for conn in &connections {
        if !keys.insert(conn.key.clone()) {
            c.error(
                None,
                format!("connection {}", conn.key),
                "duplicate connection",
            );
        }
    }
    // PutFile's `Sync` follows the flow's durability unless set: a flow that syncs every
    // commit also syncs what PutFile writes before its flow file is dropped.
    for p in &mut processors {
        if p.type_name() == "PutFile" && !p.properties.contains_key("Sync") {
            let sync = matches!(settings.sync, SyncPolicy::Always);
            p.properties.insert("Sync".into(), sync.to_string());
        }
    }
    Flow {
        name: def.flow,
        settings,
        processors,
        connections,
        stateless_groups,
        registry: c.registry.clone(),
        stateless: stateless_settings,
    }
}

fn settings(s: &SettingsDef, loc: &Locator, c: &mut Checker<'_>) -> Settings {
    let line = |k: &str| {
        loc.top_level_key_line("settings")
            .and_then(|l| loc.key_line(k, Some(l)))
    };
    let interval = c.duration(
        s.sync_interval.as_ref(),
        Duration::from_millis(100),
        line("sync_interval"),
        "settings.sync_interval".into(),
    );
    let sync = match s.sync.as_deref() {
        None | Some("always") => SyncPolicy::Always,
        Some("interval") => SyncPolicy::Interval(interval),
        Some("none") => SyncPolicy::None,
        Some(other) => {
            c.error(
                line("sync"),
                "settings.sync",
                format!("unknown sync policy `{other}` (always, interval or none)"),
            );
            SyncPolicy::Always
        }
    };
    Settings {
        sync,
        checkpoint_interval: c.duration(
            s.checkpoint_interval.as_ref(),
            Duration::from_secs(120),
            line("checkpoint_interval"),
            "settings.checkpoint_interval".into(),
        ),
        provenance_max_age: c.duration(
            s.provenance_max_age.as_ref(),
            Duration::from_secs(24 * 3600),
            line("provenance_max_age"),
            "settings.provenance_max_age".into(),
        ),
        provenance_max_size: match &s.provenance_max_size {
            None => 1 << 30,
            Some(t) => parse_size(t).unwrap_or_else(|e| {
                c.error(
                    line("provenance_max_size"),
                    "settings.provenance_max_size",
                    e.to_string(),
                );
                1 << 30
            }),
        },
    }
}

fn processor(
    pd: ProcessorDef,
    group: &str,
    group_timeout: Option<Duration>,
    line: Option<usize>,
    field: &str,
    loc: &Locator,
    c: &mut Checker<'_>,
) -> Option<Component> {
    let key_line = |k: &str| loc.key_line(k, line).or(line);
    let stateless = group_timeout.is_some();
    let Some(spec) = c.registry.spec(&pd.kind) else {
        let kinds = c.registry.kinds();
        let message = format!(
            "unknown processor type `{}`{} (known: {})",
            pd.kind,
            weir_flow_api::suggest::did_you_mean(&pd.kind, kinds.iter().copied()),
            kinds.join(", ")
        );
        c.error(key_line("type"), format!("{field}.type"), message);
        return None;
    };
    let mut properties = BTreeMap::new();
    let mut relationships: Vec<String> = spec.relationships.iter().map(|r| r.to_string()).collect();
    for (name, value) in &pd.properties {
        let pfield = format!("{field}.properties.{name}");
        let pline = key_line(name);
        // A choice is matched ignoring case and kept in its option's own spelling, so a
        // processor compares it as written in its spec.
        let value = match spec.property(name).map(|ps| ps.kind) {
            Some(PropertyKind::Choice(options)) => options
                .iter()
                .find(|o| o.eq_ignore_ascii_case(value))
                .map_or_else(|| value.clone(), |o| o.to_string()),
            _ => value.clone(),
        };
        let value = &value;
        match spec.property(name) {
            Some(ps) => check_value(ps.kind, value, pline, &pfield, c),
            None => match spec.dynamic {
                Dynamic::None => {
                    c.error(
                        pline,
                        pfield,
                        format!(
                            "unknown property of {}{} (known: {})",
                            spec.kind,
                            weir_flow_api::suggest::did_you_mean(
                                name,
                                spec.properties.iter().map(|p| p.name)
                            ),
                            spec.properties
                                .iter()
                                .map(|p| p.name)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                    continue;
                }
                Dynamic::Attributes => {
                    check_value(PropertyKind::Expression, value, pline, &pfield, c)
                }
                Dynamic::Routes => {
                    check_value(PropertyKind::Expression, value, pline, &pfield, c);
                    relationships.push(name.clone());
                }
                // Checked with the type's other properties below.
                Dynamic::Regexes | Dynamic::JsonPaths => {}
                Dynamic::RegexRoutes | Dynamic::LineRoutes => relationships.push(name.clone()),
            },
        }
        properties.insert(name.clone(), value.clone());
    }
    if spec.dynamic == Dynamic::Routes {
        let strategy = properties
            .get("Routing Strategy")
            .map_or("Route to Property name", String::as_str);
        if strategy != "Route to Property name" {
            relationships = vec!["matched".into(), "unmatched".into()];
        }
    }
    for ps in spec.properties {
        if !properties.contains_key(ps.name) {
            match ps.default {
                Some(d) => {
                    properties.insert(ps.name.to_string(), d.to_string());
                }
                None if ps.required => c.error(
                    key_line("properties"),
                    format!("{field}.properties.{}", ps.name),
                    format!("missing required property of {}", spec.kind),
                ),
                None => {}
            }
        }
    }
    // What the type's spec alone cannot check (regular expressions with the type's flags,
    // JSONPaths, settings that need one another), and relationships set by a strategy.
    for problem in crate::processors::validate(spec, &properties) {
        c.error(
            key_line(&problem.property),
            format!("{field}.properties.{}", problem.property),
            problem.message,
        );
    }
    if let Some(set) = crate::processors::relationships(spec, &properties) {
        relationships = set;
    }
    if stateless && matches!(spec.kind, "ControlRate" | "DetectDuplicate") {
        let why = if spec.kind == "ControlRate" {
            "ControlRate holds flow files in its queue until its rate allows them, which a group transaction cannot wait for"
        } else {
            "DetectDuplicate's cache belongs to one processor, and each copy of a stateless group has its own"
        };
        c.error(
            key_line("type"),
            format!("{field}.type"),
            format!("{why}; put it in a traditional group"),
        );
    }
    // A broker source with a delivery limit routes the messages past it to `dead-letter`.
    if matches!(spec.kind, "ConsumeAMQP" | "ConsumeJetStream")
        && properties
            .get("Max Deliveries")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > 0)
    {
        relationships.push(crate::processors::DEAD_LETTER.to_string());
    }
    if stateless && spec.kind == "ListenHTTP" {
        c.error(
            key_line("type"),
            format!("{field}.type"),
            "ListenHTTP answers requests as they come and cannot wait for a group transaction; put it in a traditional group and feed the stateless group through an input port",
        );
    }
    // A message held past its Ack Wait is redelivered to another consumer while the group
    // may still commit it: the wait must outlast the longest transaction.
    if spec.kind == "ConsumeJetStream"
        && let Some(timeout) = group_timeout
        && let Some(Ok(ack_wait)) = properties.get("Ack Wait").map(|v| parse_duration(v))
        && ack_wait <= timeout
    {
        c.error(
            key_line("Ack Wait"),
            format!("{field}.properties.Ack Wait"),
            format!(
                "processor `{}`: Ack Wait ({ack_wait:?}) must be longer than the stateless group's timeout ({timeout:?}), or the server redelivers messages a transaction still holds",
                pd.name
            ),
        );
    }
    if spec.kind == "PutDatabaseRecord"
        && properties
            .get("Statement Type")
            .is_some_and(|t| t.eq_ignore_ascii_case("UPSERT"))
        && properties
            .get("Update Keys")
            .is_none_or(|k| k.trim().is_empty())
    {
        c.error(
            key_line("properties"),
            format!("{field}.properties.Update Keys"),
            "UPSERT needs the key columns (a unique index must cover them)",
        );
    }
    if matches!(spec.kind, "ConvertRecord" | "SplitRecord")
        && let Err(e) = crate::processors::records::RecordConfig::from_properties(|name| {
            properties.get(name).map(String::as_str)
        })
    {
        c.error(
            key_line(e.property),
            format!("{field}.properties.{}", e.property),
            e.message,
        );
    }
    if spec.kind == "SplitRecord"
        && properties
            .get("Records Per Split")
            .is_some_and(|n| n.trim() == "0")
    {
        c.error(
            key_line("Records Per Split"),
            format!("{field}.properties.Records Per Split"),
            "must be at least 1",
        );
    }
    if spec.kind == "FetchFile"
        && properties
            .get("Completion Strategy")
            .is_some_and(|s| s.eq_ignore_ascii_case("Move File"))
        && properties
            .get("Move Destination Directory")
            .is_none_or(|d| d.trim().is_empty())
    {
        c.error(
            key_line("properties"),
            format!("{field}.properties.Move Destination Directory"),
            "required when Completion Strategy is Move File",
        );
    }
    if spec.kind == "ListenHTTP"
        && let Some(addr) = properties.get("Listening Address")
    {
        let loopback = addr
            .parse::<std::net::IpAddr>()
            .map(|a| a.is_loopback())
            .unwrap_or(addr == "localhost");
        if !loopback {
            c.error(key_line("Listening Address"), format!("{field}.properties.Listening Address"), "only loopback addresses are allowed: a flow has no token to protect a wider listener");
        }
    }
    let schedule = match &pd.schedule {
        None => Schedule::Timer(Duration::ZERO),
        Some(s) => {
            let sline = key_line("schedule");
            match s.strategy.as_str() {
                "timer" => Schedule::Timer(c.duration(
                    s.period.as_ref(),
                    Duration::ZERO,
                    sline,
                    format!("{field}.schedule.period"),
                )),
                "cron" => {
                    if stateless {
                        c.error(
                            sline,
                            format!("{field}.schedule.strategy"),
                            "CRON scheduling is not allowed in a stateless group",
                        );
                    }
                    match &s.expression {
                        None => {
                            c.error(
                                sline,
                                format!("{field}.schedule.expression"),
                                "missing: a CRON expression",
                            );
                            Schedule::Timer(Duration::ZERO)
                        }
                        Some(e) => match croner::Cron::new(e)
                            .with_seconds_required()
                            .with_dom_and_dow()
                            .parse()
                        {
                            Ok(cron) => Schedule::Cron(Box::new(cron)),
                            Err(err) => {
                                c.error(
                                    sline,
                                    format!("{field}.schedule.expression"),
                                    format!("bad CRON expression `{e}`: {err}"),
                                );
                                Schedule::Timer(Duration::ZERO)
                            }
                        },
                    }
                }
                other => {
                    c.error(
                        sline,
                        format!("{field}.schedule.strategy"),
                        format!("unknown strategy `{other}` (timer or cron)"),
                    );
                    Schedule::Timer(Duration::ZERO)
                }
            }
        }
    };
    for rel in &pd.auto_terminate {
        if !relationships.contains(rel) {
            c.error(
                key_line("auto_terminate"),
                format!("{field}.auto_terminate"),
                format!(
                    "{} has no relationship `{rel}` (it has: {})",
                    spec.kind,
                    relationships.join(", ")
                ),
            );
        }
    }
    let concurrency = pd.concurrency.unwrap_or(1) as usize;
    if concurrency == 0 {
        c.error(
            key_line("concurrency"),
            format!("{field}.concurrency"),
            "must be at least 1",
        );
    }
    Some(Component {
        name: pd.name.clone(),
        group: group.to_string(),
        kind: ComponentKind::Processor(spec),
        properties,
        schedule,
        concurrency: concurrency.max(1),
        run_duration: c.duration(
            pd.run_duration.as_ref(),
            Duration::ZERO,
            key_line("run_duration"),
            format!("{field}.run_duration"),
        ),
        penalty: c.duration(
            pd.penalty.as_ref(),
            Duration::from_secs(30),
            key_line("penalty"),
            format!("{field}.penalty"),
        ),
        yield_duration: c.duration(
            pd.yield_duration.as_ref(),
            Duration::from_secs(1),
            key_line("yield"),
            format!("{field}.yield"),
        ),
        auto_terminate: pd.auto_terminate.into_iter().collect(),
        relationships,
        failure_port: false,
        group_timeout,
        line,
    })
}

fn check_value(
    kind: PropertyKind,
    value: &str,
    line: Option<usize>,
    field: &str,
    c: &mut Checker<'_>,
) {
    let problem = match kind {
        PropertyKind::Text => None,
        PropertyKind::Expression => Template::parse(value).err().map(|e| e.to_string()),
        PropertyKind::Bool => {
            (!matches!(value, "true" | "false")).then(|| format!("`{value}` is not true or false"))
        }
        PropertyKind::Count => value
            .trim()
            .parse::<u64>()
            .err()
            .map(|_| format!("`{value}` is not a whole number")),
        PropertyKind::Duration => parse_duration(value).err().map(|e| e.to_string()),
        PropertyKind::Size => parse_size(value).err().map(|e| e.to_string()),
        PropertyKind::Regex => regex::Regex::new(value)
            .err()
            .map(|e| format!("bad regular expression: {e}")),
        PropertyKind::JsonPath => crate::processors::check_json_path(value).err(),
        PropertyKind::Choice(options) => (!options.iter().any(|o| o.eq_ignore_ascii_case(value)))
            .then(|| format!("`{value}` is not one of: {}", options.join(", "))),
    };
    if let Some(message) = problem {
        c.error(line, field.to_string(), message);
    }
}
