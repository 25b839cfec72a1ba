//! The session a processor works in: its unit of work, committed as a whole or rolled back.
//!
//! A session gets flow files from the processor's incoming queues, creates, clones, reads
//! and writes them, sets attributes, and transfers each to a relationship (or removes it).
//! At commit every change and the provenance events it makes become durable together, and
//! only then do the flow files move into their next queues; a rollback returns what the
//! session took, leaving no trace. The engines implement [`Session`]; a processor sees only
//! this trait (as `&mut dyn Session`), so it runs unchanged in the traditional engine and in
//! a stateless group's transaction.
//!
//! The trait's methods are the ones an engine implements, each callable through `dyn`;
//! `impl dyn Session` adds the generic conveniences processors call
//! (`put_attribute`, `on_complete`,
//! `wait`, ...), each one call of a trait method.

use std::borrow::Cow;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::expression::{EvalError, Template};
use crate::flowfile::{FlowFile, SmolStr};
use crate::provenance::EventType;

/// A flow file held by a session: an index into the session that gave it, meaningless in
/// another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowFileRef(usize);

impl FlowFileRef {
    /// The reference to a session's `index`th flow file (for engines).
    pub const fn new(index: usize) -> FlowFileRef {
        FlowFileRef(index)
    }

    /// Its index in its session.
    pub const fn index(self) -> usize {
        self.0
    }
}

/// Why a session could not do what it was asked, or could not commit.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A flow file was neither transferred nor removed.
    #[error("flow file {0} was not transferred to a relationship")]
    NotTransferred(String),
    /// A relationship the processor does not have.
    #[error("unknown relationship `{0}`")]
    UnknownRelationship(String),
    /// The engine's repository refused the commit.
    #[error(transparent)]
    Repository(Box<dyn std::error::Error + Send + Sync>),
    /// Content could not be read or written.
    #[error("content: {0}")]
    Content(#[from] io::Error),
    /// A hook run before the commit (`Session::before_commit`) failed: the session rolled
    /// back.
    #[error("before the commit: {0}")]
    BeforeCommit(CommitRefused),
}

/// Why a hook run before a commit (`Session::before_commit`) refused it: a destination's own
/// commit failed, and the session (or its stateless transaction) rolls back.
#[derive(Debug, thiserror::Error)]
#[error("{destination}: {source}")]
pub struct CommitRefused {
    /// Who refused and at which step, e.g. `put-orders: COMMIT`.
    pub destination: String,
    /// The cause.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl CommitRefused {
    /// `destination` refused the commit because of `source`.
    pub fn new(
        destination: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> CommitRefused {
        CommitRefused {
            destination: destination.into(),
            source: source.into(),
        }
    }
}

/// How a session's work ended, for `Session::on_complete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// Committed and durable (traditional), or the whole stateless transaction committed:
    /// a source may acknowledge what it received.
    Committed,
    /// Rolled back: a source must give back what it received, so that it comes again,
    /// after `penalty` when one is set.
    RolledBack {
        /// How long the data should wait before it is offered again.
        penalty: Option<Duration>,
    },
}

/// A processor's state (NiFi's `StateMap`, local scope): keys to values, kept by the engine
/// per component across runs (see [`Session::state`]).
pub type StateMap = std::collections::BTreeMap<String, String>;

/// A callback run once when a session's work is committed or rolled back.
pub type CompletionHook = Box<dyn FnOnce(Completion) + Send>;

/// Work that must succeed for a session's commit to happen (a destination's own commit):
/// `Err` with why rolls the session, or its stateless transaction, back.
pub type BeforeCommitHook = Box<dyn FnOnce() -> Result<(), CommitRefused> + Send>;

/// What a committed session moved: flow files and content bytes taken from the processor's
/// input queues, and sent to connections (a clone per extra connection counts again).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Committed {
    /// Flow files taken from input queues and not returned.
    pub flowfiles_in: u64,
    /// Flow files sent to connections.
    pub flowfiles_out: u64,
    /// The content bytes of the flow files taken.
    pub bytes_in: u64,
    /// The content bytes of the flow files sent.
    pub bytes_out: u64,
}

impl Committed {
    /// True when the session moved nothing.
    pub fn is_empty(&self) -> bool {
        self.flowfiles_in == 0 && self.flowfiles_out == 0
    }
}

/// What a file was when a processor took it: device, inode, size and modification time. A
/// new file written under the same name (a producer reusing names) differs in at least one
/// of them, so a deletion meant for the old file leaves it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIdentity {
    /// The device holding the file.
    pub device: u64,
    /// Its inode number.
    pub inode: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Its modification time, in nanoseconds since the epoch.
    pub modified_ns: i128,
}

impl FileIdentity {
    /// The identity of the file `meta` describes.
    pub fn of(meta: &std::fs::Metadata) -> FileIdentity {
        use std::os::unix::fs::MetadataExt;
        FileIdentity {
            device: meta.dev(),
            inode: meta.ino(),
            size: meta.size(),
            modified_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}

/// A processor's session. See the [module docs](self).
pub trait Session: Send {
    /// The component's name.
    fn component_name(&self) -> &str;

    /// Takes the best flow file from the incoming queues, if any.
    ///
    /// # Errors
    /// A swap-in that failed.
    fn get(&mut self) -> Result<Option<FlowFileRef>, SessionError>;

    /// Takes up to `max` flow files from the incoming queues (visited in turn).
    ///
    /// # Errors
    /// A swap-in that failed.
    fn get_batch(&mut self, max: usize) -> Result<Vec<FlowFileRef>, SessionError>;

    /// Makes room for `flowfiles` more flow files and an event each, at once: a source about
    /// to create a batch spares the session's vectors growing (and copying) step by step.
    fn reserve(&mut self, flowfiles: usize);

    /// Creates an empty flow file with the core attributes (CREATE, unless a RECEIVE or
    /// FETCH is reported for it).
    fn create(&mut self) -> FlowFileRef;

    /// [`create`](Session::create) with a source's own attributes and its content, the map
    /// built once (see `create_with_content`, which calls
    /// this).
    ///
    /// # Errors
    /// The content repository's I/O error; then no flow file is created.
    fn create_from(
        &mut self,
        attributes: &mut dyn Iterator<Item = (SmolStr, SmolStr)>,
        content: bytes::Bytes,
    ) -> Result<FlowFileRef, SessionError>;

    /// Creates a child of `parent`: its attributes, a new uuid, an empty content (FORK).
    fn create_child(&mut self, parent: FlowFileRef) -> FlowFileRef;

    /// Creates one flow file from several parents (JOIN): attributes the parents share.
    fn create_joined(&mut self, parents: &[FlowFileRef]) -> FlowFileRef;

    /// A copy of `original` sharing its content (CLONE).
    fn clone_flowfile(&mut self, original: FlowFileRef) -> FlowFileRef;

    /// The flow file as it is now.
    fn flowfile(&self, ff: FlowFileRef) -> &FlowFile;

    /// Runs `work` on `runtime` to its end (see `wait`, which calls this).
    fn wait_on(
        &self,
        runtime: &tokio::runtime::Handle,
        work: Pin<&mut (dyn Future<Output = ()> + '_)>,
    );

    /// An attribute's value, `fileSize` included (see [`FlowFile::attribute`]).
    fn attribute(&self, ff: FlowFileRef, name: &str) -> Option<Cow<'_, str>>;

    /// Sets an attribute (`uuid` cannot be changed); see
    /// `put_attribute`, which calls this.
    fn set_attribute(&mut self, ff: FlowFileRef, name: SmolStr, value: SmolStr);

    /// Removes an attribute.
    fn remove_attribute(&mut self, ff: FlowFileRef, name: &str);

    /// Reads the whole content. Content a stateless transaction holds in memory is shared,
    /// not copied (a reference count); content from the repository is read into a new
    /// buffer.
    ///
    /// # Errors
    /// The content repository's I/O error.
    fn read(&self, ff: FlowFileRef) -> Result<bytes::Bytes, SessionError>;

    /// Runs `f` on the whole content, borrowed (see `read_with`, which
    /// calls this).
    ///
    /// # Errors
    /// The content repository's I/O error; then `f` is not run.
    fn read_into(&self, ff: FlowFileRef, f: &mut dyn FnMut(&[u8])) -> Result<(), SessionError>;

    /// Replaces the content (a new claim; the old one is untouched).
    ///
    /// # Errors
    /// The content repository's I/O error.
    fn write(&mut self, ff: FlowFileRef, data: &[u8]) -> Result<(), SessionError>;

    /// As [`write`](Session::write), taking the content: a stateless transaction holds it
    /// as it is (no copy, no allocation); the content repository writes it as `write` does.
    ///
    /// # Errors
    /// The content repository's I/O error.
    fn write_bytes(&mut self, ff: FlowFileRef, data: bytes::Bytes) -> Result<(), SessionError>;

    /// Replaces the content with the rest of `source`, copied in the kernel into the
    /// content repository (no copy through memory); `len_hint` is the file's size. Inside a
    /// stateless transaction the content is read into the transaction's memory instead.
    ///
    /// # Errors
    /// The content repository's I/O error, or `source`'s.
    fn write_from(
        &mut self,
        ff: FlowFileRef,
        source: &mut std::fs::File,
        len_hint: u64,
    ) -> Result<(), SessionError>;

    /// Appends the content of `ff` to `out`, large contents copied in the kernel.
    ///
    /// # Errors
    /// The content repository's or `out`'s I/O error.
    fn export(&self, ff: FlowFileRef, out: &mut std::fs::File) -> Result<(), SessionError>;

    /// Sends `ff` to `relationship` at commit.
    ///
    /// # Errors
    /// [`SessionError::UnknownRelationship`].
    fn transfer(&mut self, ff: FlowFileRef, relationship: &str) -> Result<(), SessionError>;

    /// Puts `ff` back in its queue at commit, unchanged and not penalized.
    fn give_back(&mut self, ff: FlowFileRef);

    /// Removes `ff` from the flow at commit (DROP).
    fn remove(&mut self, ff: FlowFileRef);

    /// Marks `ff` penalized: in its next queue it waits out the processor's penalty.
    fn penalize(&mut self, ff: FlowFileRef);

    /// As [`report`](Session::report), for an event that is true only if the work commits:
    /// inside a stateless transaction it is dropped at a rollback, even a SEND (which
    /// `report` keeps, since the data left). A destination whose writes roll back with the
    /// group (PutDatabaseRecord's) reports its SEND this way.
    fn report_on_commit(
        &mut self,
        ff: FlowFileRef,
        event_type: EventType,
        transit_uri: Option<SmolStr>,
        details: Option<SmolStr>,
    );

    /// Records an explicit provenance event (RECEIVE, FETCH, SEND, ROUTE,
    /// REMOTE_INVOCATION) for `ff`.
    fn report(
        &mut self,
        ff: FlowFileRef,
        event_type: EventType,
        transit_uri: Option<SmolStr>,
        details: Option<SmolStr>,
    );

    /// Number of flow files the session holds.
    fn len(&self) -> usize;

    /// True when the session holds no flow file.
    fn is_empty(&self) -> bool;

    /// Adds `hook`, run once this session's work is settled (see
    /// `on_complete`, which calls this).
    fn add_completion_hook(&mut self, hook: CompletionHook);

    /// Adds `hook`, run before this session's work is committed (see
    /// `before_commit`, which calls this).
    fn add_before_commit_hook(&mut self, hook: BeforeCommitHook);

    /// Deletes `path` once this session's commit is durable (and again at recovery if the
    /// process dies in between), while it is still the file `identity` describes (taken from
    /// the handle the content was read through): a new file under the same name is kept.
    /// Inside a stateless transaction the deletion waits for the whole transaction's commit.
    fn delete_source_on_commit(&mut self, path: String, identity: FileIdentity);

    /// The component's state as this session sees it: what [`set_state`](Session::set_state)
    /// gave last in this session (or in an uncommitted session of the same stateless
    /// transaction), else the committed state (empty for a component that never set one).
    /// NiFi's `ProcessSession.getState(Scope.LOCAL)`. Costs a copy of the map.
    fn state(&self) -> StateMap;

    /// Replaces the component's state when this session commits, in the same durable write
    /// as its flow files (inside a stateless group, with the whole transaction's): a crash
    /// keeps both or neither, and a rollback drops it. NiFi's
    /// `ProcessSession.setState(map, Scope.LOCAL)`. State is kept by component name, in the
    /// flow-file repository, so it survives a restart with the same repository.
    fn set_state(&mut self, state: StateMap);

    /// True for a port or funnel: pass-through components.
    fn is_pass_through(&self) -> bool;

    /// Commits: the session's changes become durable at once, then the flow files move on.
    /// Returns how many flow files and content bytes it took in and sent out. For a session
    /// from a [`SessionFactory`]; the engine commits a trigger's session itself.
    ///
    /// # Errors
    /// [`SessionError`]; the session is rolled back (inputs back in their queues, not
    /// penalized) before the error is returned.
    fn commit(self: Box<Self>) -> Result<Committed, SessionError>;

    /// Rolls back: flow files taken go back to their queues (penalized for the processor's
    /// penalty if `penalize`), new content is released.
    fn rollback(self: Box<Self>, penalize: bool);
}

impl dyn Session + '_ {
    /// Runs `hook` once this session's work is settled: after the durable commit
    /// (traditional), or after the whole group transaction commits (stateless), with
    /// [`Completion::Committed`]; after a rollback with [`Completion::RolledBack`]. Sources
    /// acknowledge or give back what they received here.
    pub fn on_complete(&mut self, hook: impl FnOnce(Completion) + Send + 'static) {
        self.add_completion_hook(Box::new(hook));
    }

    /// Runs `hook` before this session's work is committed: before its durable write
    /// (traditional), or before the whole stateless transaction's and every completion
    /// hook, so before any source acknowledges. A destination that keeps its own
    /// transaction open for the group (PutDatabaseRecord) commits it here. An `Err` rolls
    /// the session (or the transaction) back, and the completion hooks see
    /// [`Completion::RolledBack`]. Hooks run in the order they were given; all run even
    /// after one fails. A session that rolls back drops its hooks unrun.
    pub fn before_commit(
        &mut self,
        hook: impl FnOnce() -> Result<(), CommitRefused> + Send + 'static,
    ) {
        self.add_before_commit_hook(Box::new(hook));
    }

    /// Sets an attribute (`uuid` cannot be changed). A name given as a [`SmolStr`]
    /// constant is shared, not copied; a name of more than 23 bytes given as text is copied
    /// once.
    pub fn put_attribute(
        &mut self,
        ff: FlowFileRef,
        name: impl Into<SmolStr>,
        value: impl Into<SmolStr>,
    ) {
        self.set_attribute(ff, name.into(), value.into());
    }

    /// [`create`](Session::create) with a source's own attributes (a message's routing key,
    /// say) and its content, the map built once: cheaper than a
    /// `put_attribute` each and a
    /// `write_owned` after. An entry naming a core attribute
    /// (`uuid`, `filename`, `path`, `entryDate`, `lineageStartDate`) is ignored, and
    /// `fileSize` is the content's whatever an entry says; of entries with the same name the
    /// last is kept. Entries in name order that sort before `entryDate` cost least. The
    /// content is held as `write_owned` holds it.
    ///
    /// # Errors
    /// The content repository's I/O error; then no flow file is created.
    pub fn create_with_content(
        &mut self,
        attributes: impl IntoIterator<Item = (SmolStr, SmolStr)>,
        content: impl Into<bytes::Bytes>,
    ) -> Result<FlowFileRef, SessionError> {
        self.create_from(&mut attributes.into_iter(), content.into())
    }

    /// As [`write`](Session::write), taking the content: a stateless transaction holds it
    /// as it is (no copy, no allocation); the content repository writes it as `write` does.
    ///
    /// # Errors
    /// The content repository's I/O error.
    pub fn write_owned(
        &mut self,
        ff: FlowFileRef,
        data: impl Into<bytes::Bytes>,
    ) -> Result<(), SessionError> {
        self.write_bytes(ff, data.into())
    }

    /// Runs `f` on the whole content, borrowed. Unlike [`read`](Session::read), content a
    /// stateless transaction holds is not shared (a shared copy of a buffer made from a
    /// `Vec` costs an allocation at its first share): a processor that makes new content
    /// from the old one sees it for nothing (while `f` runs, the transaction's state is
    /// locked). Content from the repository is read into a buffer for `f`.
    ///
    /// # Errors
    /// The content repository's I/O error.
    pub fn read_with<R>(
        &self,
        ff: FlowFileRef,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, SessionError> {
        let mut f = Some(f);
        let mut result = None;
        self.read_into(ff, &mut |content| {
            if let Some(f) = f.take() {
                result = Some(f(content));
            }
        })?;
        Ok(result.expect("a session runs the reader once when the read succeeds"))
    }

    /// Waits on `runtime` for `work`, a processor's requests to an outside service (a
    /// database batch, a publish), and returns its result.
    ///
    /// Inside a stateless transaction, once `work` has been polled (its requests are on
    /// their way) and is not done, the group's sources ready their next trigger and the
    /// copy's last commit's provenance events are recorded while the service works: work
    /// the next trigger and the commits would otherwise do on the copy's serial path.
    /// Outside one, this is `runtime.block_on(work)`.
    pub fn wait<F: Future>(&self, runtime: &tokio::runtime::Handle, work: F) -> F::Output {
        let mut output = None;
        {
            let work = std::pin::pin!(async {
                output = Some(work.await);
            });
            self.wait_on(runtime, work);
        }
        output.expect("a session runs the work it waits for to its end")
    }

    /// Evaluates `template` against the attributes of `ff`, borrowing from them where it
    /// can (see [`Template::evaluate`]).
    ///
    /// # Errors
    /// [`EvalError`] when a function of the template cannot apply.
    pub fn evaluate<'a>(
        &'a self,
        template: &'a Template,
        ff: FlowFileRef,
    ) -> Result<Cow<'a, str>, EvalError> {
        let flowfile = self.flowfile(ff);
        template.evaluate(&|k| flowfile.attribute(k))
    }
}

/// What a [`SessionFactory`] makes sessions from: the engine, for one component.
pub trait SessionSource: Send + Sync {
    /// A new session of the component.
    fn session(&self) -> Box<dyn Session>;

    /// True when a connection downstream is full, or the engine is stopping or poisoned:
    /// a source must not take more data.
    fn held_back(&self) -> bool;

    /// Records a committed session's counts.
    fn count(&self, committed: &Committed);
}

/// Makes sessions outside triggers, for a processor that takes data on its own (ListenHTTP's
/// requests) or holds work across triggers (MergeContent's bins). Given to
/// [`Processor::start`](crate::processor::Processor::start). Cheap to clone (shared).
#[derive(Clone)]
pub struct SessionFactory(Arc<dyn SessionSource>);

impl std::fmt::Debug for SessionFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionFactory")
    }
}

impl SessionFactory {
    /// A factory of `source`'s sessions.
    pub fn new(source: Arc<dyn SessionSource>) -> SessionFactory {
        SessionFactory(source)
    }

    /// A new session; commit or roll it back.
    pub fn session(&self) -> Box<dyn Session> {
        self.0.session()
    }

    /// True when a connection downstream is full, or the engine is stopping or poisoned:
    /// a source must not take more data.
    pub fn held_back(&self) -> bool {
        self.0.held_back()
    }

    /// Records a committed session's counts (a session the engine did not commit itself).
    pub fn count(&self, committed: &Committed) {
        self.0.count(committed);
    }
}
