//! Keyed state with event-time timers: the stream stage that decides for itself when to emit.
//!
//! Each key has a state. An item updates its key's state and may set timers on it, at event
//! times; a timer at `t` fires once the watermark passes `t` (reaches `t + 1` or more), and
//! may emit results, stamped `t`, before the watermark goes on. So a result stamped `t` is
//! never late downstream, and results come out in timer order per key. This is what a
//! query needs that waits for something other than a window's end: an auction that closes at
//! its own expiry time, rows sorted by event time before a running aggregate.
//!
//! ```
//! use weir_exec::links::timers::Timers;
//!
//! let mut timers = Timers::default();
//! timers.at(1_000);
//! timers.at(500);
//! assert_eq!(timers.times(), [1_000, 500]);
//! ```

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use weir_core::{Item, Outbox, PartitionKey, ProcessorContext, ProcessorResult, Watermark};

use crate::event_time::Timestamped;
use crate::links::link::{Link, chain_watermark};
use crate::links::state::{
    InstancePlace, InstanceTimes, LinkEntries, LinkWriter, Rescaled, StateCodec, put_instance_time,
    refuse_save_if,
};

/// The timers an item sets on its key: event times at which the key's timer function runs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Timers {
    times: Vec<i64>,
}

impl Timers {
    /// Sets a timer at `time`: the key's timer function runs with `time` once the watermark
    /// passes it. Setting the same time twice on a key fires it once. A time the watermark
    /// already passed fires with the next watermark.
    pub fn at(&mut self, time: i64) {
        self.times.push(time);
    }

    /// The times set, in the order they were set.
    pub fn times(&self) -> &[i64] {
        &self.times
    }
}

/// A key's state and its pending timers: what a snapshot saves per key.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct KeyState<S> {
    /// The state the functions see.
    pub state: S,
    /// The times of the key's timers that have not fired. A set: a key may have many (a
    /// timer per item), and they fire from the earliest.
    pub timers: BTreeSet<i64>,
}

/// The stage: keyed state, item function and timer function; see the [module docs](self).
///
/// `on_item(state, key, timestamp, item, timers)` updates the state and sets timers;
/// `on_timer(state, key, time, out)` appends the results to emit and returns whether to keep
/// the key's state: when it returns false the state and the key's other timers are dropped.
///
/// Cost: a hash lookup per item; per timer set, a B-tree insert in the key's set and, for a
/// time new to the key, a key in the list of that time; per timer fired, a B-tree removal.
pub struct TimerKeyedLink<T, K, S, R, KF: ?Sized, C, I, F> {
    states: FxHashMap<K, KeyState<S>>,
    /// The keys with a timer at each time. A key whose state was dropped, or whose timer
    /// fired already, may still be listed: firing checks the key's own list.
    due: BTreeMap<i64, Vec<K>>,
    /// Results of fired timers not pushed yet (the chain was full).
    pending: VecDeque<Timestamped<R>>,
    watermark: i64,
    key: Arc<KF>,
    create: Arc<C>,
    on_item: Arc<I>,
    on_timer: Arc<F>,
    next: Box<dyn Link<Timestamped<R>>>,
    codec: (StateCodec<K>, StateCodec<KeyState<S>>),
    place: InstancePlace,
    out: Vec<R>,
    timers: Timers,
    _t: PhantomData<fn(T)>,
}

impl<T, K, S, R, KF: ?Sized, C, I, F> TimerKeyedLink<T, K, S, R, KF, C, I, F> {
    /// The stage, feeding `next`; see the type's docs for the functions.
    pub fn new(
        key: Arc<KF>,
        create: Arc<C>,
        on_item: Arc<I>,
        on_timer: Arc<F>,
        next: Box<dyn Link<Timestamped<R>>>,
        codec: (StateCodec<K>, StateCodec<KeyState<S>>),
    ) -> Self {
        TimerKeyedLink {
            states: FxHashMap::default(),
            due: BTreeMap::new(),
            pending: VecDeque::new(),
            watermark: i64::MIN,
            key,
            create,
            on_item,
            on_timer,
            next,
            codec,
            place: InstancePlace::default(),
            out: Vec::new(),
            timers: Timers::default(),
            _t: PhantomData,
        }
    }
}

impl<T, K, S, R, KF, C, I, F> TimerKeyedLink<T, K, S, R, KF, C, I, F>
where
    K: Hash + Eq + Clone,
    KF: ?Sized,
    F: Fn(&mut S, &K, i64, &mut Vec<R>) -> bool,
{
    /// Runs every timer before `wm` (every timer at all with `None`, at the end of the
    /// input), in time order, into `pending`.
    fn fire_before(&mut self, wm: Option<i64>) {
        while let Some(entry) = self.due.first_entry() {
            if wm.is_some_and(|wm| *entry.key() >= wm) {
                break;
            }
            let (time, keys) = entry.remove_entry();
            for key in keys {
                let Some(ks) = self.states.get_mut(&key) else {
                    continue;
                };
                if !ks.timers.remove(&time) {
                    continue; // listed twice: fired already
                }
                let keep = (self.on_timer)(&mut ks.state, &key, time, &mut self.out);
                self.pending
                    .extend(self.out.drain(..).map(|item| Timestamped {
                        timestamp: time,
                        item,
                    }));
                if !keep {
                    self.states.remove(&key);
                }
            }
        }
    }
}

impl<T, K, S, R, KF: ?Sized, C, I, F> TimerKeyedLink<T, K, S, R, KF, C, I, F>
where
    R: Item,
{
    /// Pushes the fired timers' results as the chain has room. Returns true when all are
    /// pushed and the chain's backlog is out.
    fn send_pending(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        loop {
            if !self.next.flush(outbox)? {
                return Ok(false);
            }
            let mut room = true;
            while room && let Some(item) = self.pending.pop_front() {
                room = self.next.push(item);
            }
            if room {
                return Ok(true);
            }
        }
    }
}

impl<T, K, S, R, KF, C, I, F> Link<Timestamped<T>> for TimerKeyedLink<T, K, S, R, KF, C, I, F>
where
    T: 'static,
    K: Item + Hash + Eq + PartitionKey,
    S: Send + 'static,
    R: Item,
    KF: Fn(&T) -> K + Send + Sync + ?Sized,
    C: Fn() -> S + Send + Sync,
    I: Fn(&mut S, &K, i64, T, &mut Timers) + Send + Sync,
    F: Fn(&mut S, &K, i64, &mut Vec<R>) -> bool + Send + Sync,
{
    fn init(&mut self, ctx: &ProcessorContext) -> ProcessorResult<()> {
        self.place = InstancePlace::of(ctx);
        self.next.init(ctx)
    }

    fn push(&mut self, item: Timestamped<T>) -> bool {
        let key = (self.key)(&item.item);
        let ks = match self.states.get_mut(&key) {
            Some(ks) => ks,
            None => self.states.entry(key.clone()).or_insert(KeyState {
                state: (self.create)(),
                timers: BTreeSet::new(),
            }),
        };
        (self.on_item)(
            &mut ks.state,
            &key,
            item.timestamp,
            item.item,
            &mut self.timers,
        );
        for time in self.timers.times.drain(..) {
            if ks.timers.insert(time) {
                self.due.entry(time).or_default().push(key.clone());
            }
        }
        // Items only set timers; results come with the watermark.
        true
    }

    fn watermark(&mut self, wm: Watermark, outbox: &mut Outbox) -> ProcessorResult<bool> {
        if wm.0 > self.watermark {
            self.watermark = wm.0;
            self.fire_before(Some(wm.0));
        }
        Ok(self.send_pending(outbox)? && chain_watermark(&mut *self.next, wm, outbox)?)
    }

    fn flush(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        self.next.flush(outbox)
    }

    fn idle(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        // Timers wait for the watermark, idle or not.
        self.next.idle(outbox)
    }

    fn complete(&mut self, outbox: &mut Outbox) -> ProcessorResult<bool> {
        // The end of the input fires every timer, those at `i64::MAX` too (which no
        // watermark passes).
        self.watermark = i64::MAX;
        self.fire_before(None);
        Ok(self.send_pending(outbox)?
            && chain_watermark(&mut *self.next, Watermark::MAX, outbox)?
            && self.next.complete(outbox)?)
    }

    fn is_cooperative(&self) -> bool {
        self.next.is_cooperative()
    }

    fn prepare_save(&mut self) -> ProcessorResult<bool> {
        self.next.prepare_save()
    }

    fn save(&mut self, state: &mut LinkWriter<'_>) -> ProcessorResult<()> {
        refuse_save_if(!self.pending.is_empty(), "fired timers' results not sent")?;
        let (keys, values) = &self.codec;
        let mut value = Vec::new();
        for (key, ks) in &self.states {
            let k = keys.to_bytes(key)?;
            value.clear();
            (values.encode)(ks, &mut value)?;
            state.put_keyed(key, &k, value.clone());
        }
        put_instance_time(state, self.place, b"watermark", self.watermark);
        self.next.save(&mut state.next())
    }

    fn restore(&mut self, entries: &mut LinkEntries<'_>) -> ProcessorResult<()> {
        let (keys, values) = &self.codec;
        let mut watermarks = InstanceTimes::default();
        for e in entries.take() {
            if watermarks.take(b"watermark", &e) || e.partition.is_none() {
                continue;
            }
            let key = (keys.decode)(&e.key)?;
            let ks: KeyState<S> = (values.decode)(&e.value)?;
            for &time in &ks.timers {
                self.due.entry(time).or_default().push(key.clone());
            }
            self.states.insert(key, ks);
        }
        // The least: a timer the restored instances had not all fired fires again, never
        // one that had not fired is skipped.
        if let Some(wm) = watermarks.resolve(self.place, Rescaled::Least) {
            self.watermark = wm;
        }
        self.next.restore(&mut entries.next())
    }

    fn commit(&mut self) -> ProcessorResult<bool> {
        self.next.commit()
    }
}
