//! Aggregate operations: how a group of items is folded into one result.
//!
//! ```
//! use weir::aggregate::{AggregateOperation, all_of, averaging, counting, summing};
//!
//! let op = all_of((counting(), summing(|x: &i64| *x), averaging(|x: &i64| *x as f64)));
//! let mut acc = AggregateOperation::<i64>::create(&op);
//! for x in [1, 2, 3, 4] {
//!     op.accumulate(&mut acc, &x);
//! }
//! assert_eq!(op.finish(acc), (4, 10, 2.5));
//! ```
//!
//! An [`AggregateOperation`] has four primitives, as in Jet: `create` a fresh accumulator,
//! `accumulate` an item into it, `combine` two accumulators (partial results from different
//! processor instances), and `finish` an accumulator into the result. An operation that can
//! also `deduct` one accumulator from another lets sliding windows slide without recomputing.
//!
//! A grouped aggregation runs in two stages: every instance accumulates locally, then the
//! partial accumulators are combined by key. So `combine` must be associative, and the
//! accumulator (`Acc`) must be an [`Item`]: it travels between instances.
//!
//! Cost: the operations are generic, so the runtime calls them statically, with no allocation
//! per item except where the accumulator itself grows (`to_list`, `to_set`).

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::Hash;
use std::marker::PhantomData;
use std::ops::{AddAssign, SubAssign};

use rustc_hash::FxHashMap;
use weir_core::Item;

/// Folds items of type `T` into a result. See the [module docs](self).
pub trait AggregateOperation<T>: Send + Sync + 'static {
    /// The running state.
    type Acc: Item;
    /// The result.
    type Output: Item;

    /// A fresh, empty accumulator.
    fn create(&self) -> Self::Acc;
    /// Folds one item into `acc`.
    fn accumulate(&self, acc: &mut Self::Acc, item: &T);
    /// Folds the partial accumulator `other` into `acc`. Must be associative.
    fn combine(&self, acc: &mut Self::Acc, other: Self::Acc);
    /// Turns an accumulator into the result.
    fn finish(&self, acc: Self::Acc) -> Self::Output;
    /// Whether [`deduct`](Self::deduct) is supported, and exact: `deduct(combine(a, b), b)`
    /// must equal `a` for every input, or sliding windows drift (floating-point sums do not
    /// qualify; see [`Summand`]).
    fn has_deduct(&self) -> bool {
        false
    }
    /// Removes the contribution of `other` from `acc`: the inverse of `combine`. Only called
    /// when [`has_deduct`](Self::has_deduct) is true.
    fn deduct(&self, _acc: &mut Self::Acc, _other: &Self::Acc) {
        unreachable!("deduct called on an operation without has_deduct")
    }
}

/// Counts items. See [`counting`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting;

/// Counts the items: `u64`.
pub fn counting() -> Counting {
    Counting
}

impl<T> AggregateOperation<T> for Counting {
    type Acc = u64;
    type Output = u64;
    fn create(&self) -> u64 {
        0
    }
    #[inline]
    fn accumulate(&self, acc: &mut u64, _item: &T) {
        *acc += 1;
    }
    fn combine(&self, acc: &mut u64, other: u64) {
        *acc += other;
    }
    fn finish(&self, acc: u64) -> u64 {
        acc
    }
    fn has_deduct(&self) -> bool {
        true
    }
    fn deduct(&self, acc: &mut u64, other: &u64) {
        *acc -= other;
    }
}

/// Sums a number taken from each item. See [`summing`].
pub struct Summing<F, N> {
    f: F,
    _n: PhantomData<fn() -> N>,
}

/// Sums `f(item)`. `N` is any built-in number type (`i64`, `u64`, `f64`, ...), or one of
/// your own that implements [`Summand`].
pub fn summing<T, N, F>(f: F) -> Summing<F, N>
where
    F: Fn(&T) -> N + Send + Sync + 'static,
{
    Summing { f, _n: PhantomData }
}

/// A number [`summing`] can add up.
///
/// [`EXACT_INVERSE`](Self::EXACT_INVERSE) says whether subtracting a value undoes adding it,
/// always. For integers it does (in wrapping arithmetic too), so a sliding window slides by
/// deducting the frame that leaves. For floating point it does not: `1e17 + 1.0 - 1e17` is
/// `0.0`, and once an infinity has been added, subtracting it gives NaN for good. So float
/// sums recompute each window from its frames.
pub trait Summand: Item + Copy + Default + AddAssign + SubAssign {
    /// Whether `(a + b) - b == a` for every `a` and `b`.
    const EXACT_INVERSE: bool;
}

macro_rules! summands {
    ($exact:literal: $($t:ty),*) => {
        $(impl Summand for $t {
            const EXACT_INVERSE: bool = $exact;
        })*
    };
}
summands!(true: i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);
summands!(false: f32, f64);

impl<T, N, F> AggregateOperation<T> for Summing<F, N>
where
    N: Summand,
    F: Fn(&T) -> N + Send + Sync + 'static,
{
    type Acc = N;
    type Output = N;
    fn create(&self) -> N {
        N::default()
    }
    #[inline]
    fn accumulate(&self, acc: &mut N, item: &T) {
        *acc += (self.f)(item);
    }
    fn combine(&self, acc: &mut N, other: N) {
        *acc += other;
    }
    fn finish(&self, acc: N) -> N {
        acc
    }
    fn has_deduct(&self) -> bool {
        N::EXACT_INVERSE
    }
    fn deduct(&self, acc: &mut N, other: &N) {
        *acc -= *other;
    }
}

/// Averages a number taken from each item. See [`averaging`].
pub struct Averaging<F>(F);

/// The mean of `f(item)`, as `f64`; `NaN` for no items.
pub fn averaging<T, F>(f: F) -> Averaging<F>
where
    F: Fn(&T) -> f64 + Send + Sync + 'static,
{
    Averaging(f)
}

impl<T, F> AggregateOperation<T> for Averaging<F>
where
    F: Fn(&T) -> f64 + Send + Sync + 'static,
{
    /// (count, sum)
    type Acc = (u64, f64);
    type Output = f64;
    fn create(&self) -> (u64, f64) {
        (0, 0.0)
    }
    #[inline]
    fn accumulate(&self, acc: &mut (u64, f64), item: &T) {
        acc.0 += 1;
        acc.1 += (self.0)(item);
    }
    fn combine(&self, acc: &mut (u64, f64), other: (u64, f64)) {
        acc.0 += other.0;
        acc.1 += other.1;
    }
    fn finish(&self, acc: (u64, f64)) -> f64 {
        if acc.0 == 0 {
            f64::NAN
        } else {
            acc.1 / acc.0 as f64
        }
    }
    // No `deduct`: subtracting a float sum is not exact (see [`Summand`]), so sliding
    // windows recompute the mean from their frames.
}

/// Keeps the item with the least or greatest key. See [`min_by`] and [`max_by`].
pub struct Extreme<F, K> {
    key: F,
    keep_greater: bool,
    _k: PhantomData<fn() -> K>,
}

/// The item with the smallest `key(item)` (the first one on ties), or `None` for no items.
pub fn min_by<T, K: Ord, F: Fn(&T) -> K + Send + Sync + 'static>(key: F) -> Extreme<F, K> {
    Extreme {
        key,
        keep_greater: false,
        _k: PhantomData,
    }
}

/// The item with the largest `key(item)` (the first one on ties), or `None` for no items.
pub fn max_by<T, K: Ord, F: Fn(&T) -> K + Send + Sync + 'static>(key: F) -> Extreme<F, K> {
    Extreme {
        key,
        keep_greater: true,
        _k: PhantomData,
    }
}

impl<F, K> Extreme<F, K> {
    fn better<T>(&self, candidate: &T, current: &T) -> bool
    where
        F: Fn(&T) -> K,
        K: Ord,
    {
        let (c, k) = ((self.key)(candidate), (self.key)(current));
        if self.keep_greater { c > k } else { c < k }
    }
}

impl<T, K, F> AggregateOperation<T> for Extreme<F, K>
where
    T: Item,
    K: Ord + 'static,
    F: Fn(&T) -> K + Send + Sync + 'static,
{
    type Acc = Option<T>;
    type Output = Option<T>;
    fn create(&self) -> Option<T> {
        None
    }
    fn accumulate(&self, acc: &mut Option<T>, item: &T) {
        match acc {
            Some(current) if !self.better(item, current) => {}
            _ => *acc = Some(item.clone()),
        }
    }
    fn combine(&self, acc: &mut Option<T>, other: Option<T>) {
        if let Some(other) = other {
            match acc {
                Some(current) if !self.better(&other, current) => {}
                _ => *acc = Some(other),
            }
        }
    }
    fn finish(&self, acc: Option<T>) -> Option<T> {
        acc
    }
}

/// Collects items into a `Vec`. See [`to_list`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ToList;

/// All items, as a `Vec` (in arrival order within one instance; instances in any order).
pub fn to_list() -> ToList {
    ToList
}

impl<T: Item> AggregateOperation<T> for ToList {
    type Acc = Vec<T>;
    type Output = Vec<T>;
    fn create(&self) -> Vec<T> {
        Vec::new()
    }
    fn accumulate(&self, acc: &mut Vec<T>, item: &T) {
        acc.push(item.clone());
    }
    fn combine(&self, acc: &mut Vec<T>, mut other: Vec<T>) {
        acc.append(&mut other);
    }
    fn finish(&self, acc: Vec<T>) -> Vec<T> {
        acc
    }
}

/// Collects distinct items into a `HashSet`. See [`to_set`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ToSet;

/// The distinct items, as a `HashSet`.
pub fn to_set() -> ToSet {
    ToSet
}

impl<T: Item + Hash + Eq> AggregateOperation<T> for ToSet {
    type Acc = HashSet<T>;
    type Output = HashSet<T>;
    fn create(&self) -> HashSet<T> {
        HashSet::new()
    }
    fn accumulate(&self, acc: &mut HashSet<T>, item: &T) {
        if !acc.contains(item) {
            acc.insert(item.clone());
        }
    }
    fn combine(&self, acc: &mut HashSet<T>, other: HashSet<T>) {
        acc.extend(other);
    }
    fn finish(&self, acc: HashSet<T>) -> HashSet<T> {
        acc
    }
}

/// Keeps the `n` items with the greatest keys. See [`top_n`].
pub struct TopN<F, K> {
    n: usize,
    key: F,
    _k: PhantomData<fn() -> K>,
}

/// The `n` items with the largest `key(item)`, largest first. Ties keep the earlier item.
pub fn top_n<T, K: Ord, F: Fn(&T) -> K + Send + Sync + 'static>(n: usize, key: F) -> TopN<F, K> {
    TopN {
        n,
        key,
        _k: PhantomData,
    }
}

impl<F, K: Ord> TopN<F, K> {
    /// Inserts keeping `acc` sorted by key, descending, and at most `n` long. O(n) per item,
    /// which is right for the small `n` this is meant for.
    fn insert<T>(&self, acc: &mut Vec<T>, item: T)
    where
        F: Fn(&T) -> K,
    {
        let k = (self.key)(&item);
        let at = acc.partition_point(|x| (self.key)(x) >= k);
        if at < self.n {
            acc.insert(at, item);
            acc.truncate(self.n);
        }
    }
}

impl<T, K, F> AggregateOperation<T> for TopN<F, K>
where
    T: Item,
    K: Ord + 'static,
    F: Fn(&T) -> K + Send + Sync + 'static,
{
    type Acc = Vec<T>;
    type Output = Vec<T>;
    fn create(&self) -> Vec<T> {
        Vec::new()
    }
    fn accumulate(&self, acc: &mut Vec<T>, item: &T) {
        self.insert(acc, item.clone());
    }
    fn combine(&self, acc: &mut Vec<T>, other: Vec<T>) {
        for item in other {
            self.insert(acc, item);
        }
    }
    fn finish(&self, acc: Vec<T>) -> Vec<T> {
        acc
    }
}

/// Runs several operations over the same items. See [`all_of`].
pub struct AllOf<Ops>(Ops);

/// Runs every operation of a tuple (two to four) over the same items; the result is the tuple
/// of their results.
pub fn all_of<Ops>(ops: Ops) -> AllOf<Ops> {
    AllOf(ops)
}

macro_rules! all_of_impl {
    ($($op:ident $i:tt),+) => {
        impl<T, $($op: AggregateOperation<T>),+> AggregateOperation<T> for AllOf<($($op,)+)> {
            type Acc = ($($op::Acc,)+);
            type Output = ($($op::Output,)+);
            fn create(&self) -> Self::Acc {
                ($(self.0.$i.create(),)+)
            }
            fn accumulate(&self, acc: &mut Self::Acc, item: &T) {
                $(self.0.$i.accumulate(&mut acc.$i, item);)+
            }
            fn combine(&self, acc: &mut Self::Acc, other: Self::Acc) {
                $(self.0.$i.combine(&mut acc.$i, other.$i);)+
            }
            fn finish(&self, acc: Self::Acc) -> Self::Output {
                ($(self.0.$i.finish(acc.$i),)+)
            }
            fn has_deduct(&self) -> bool {
                true $(&& self.0.$i.has_deduct())+
            }
            fn deduct(&self, acc: &mut Self::Acc, other: &Self::Acc) {
                $(self.0.$i.deduct(&mut acc.$i, &other.$i);)+
            }
        }
    };
}
all_of_impl!(A 0, B 1);
all_of_impl!(A 0, B 1, C 2);
all_of_impl!(A 0, B 1, C 2, D 3);

/// A user-defined operation built from four functions. See [`aggregate_operation`].
pub struct Custom<C, Acc, Com, Fin, A> {
    create: C,
    accumulate: Acc,
    combine: Com,
    finish: Fin,
    deduct: Option<DeductFn<A>>,
}

/// The optional inverse of `combine` of a [`Custom`] operation.
type DeductFn<A> = Box<dyn Fn(&mut A, &A) + Send + Sync>;

/// An operation from its primitives: `create` an accumulator `A`, `accumulate` an item into it,
/// `combine` two accumulators, `finish` into the result.
pub fn aggregate_operation<T, A, R, C, Acc, Com, Fin>(
    create: C,
    accumulate: Acc,
    combine: Com,
    finish: Fin,
) -> Custom<C, Acc, Com, Fin, A>
where
    C: Fn() -> A + Send + Sync + 'static,
    Acc: Fn(&mut A, &T) + Send + Sync + 'static,
    Com: Fn(&mut A, A) + Send + Sync + 'static,
    Fin: Fn(A) -> R + Send + Sync + 'static,
{
    Custom {
        create,
        accumulate,
        combine,
        finish,
        deduct: None,
    }
}

impl<C, Acc, Com, Fin, A> Custom<C, Acc, Com, Fin, A> {
    /// Adds the inverse of `combine`, enabling [`AggregateOperation::deduct`].
    pub fn with_deduct(mut self, deduct: impl Fn(&mut A, &A) + Send + Sync + 'static) -> Self {
        self.deduct = Some(Box::new(deduct));
        self
    }
}

impl<T, A, R, C, Acc, Com, Fin> AggregateOperation<T> for Custom<C, Acc, Com, Fin, A>
where
    A: Item,
    R: Item,
    C: Fn() -> A + Send + Sync + 'static,
    Acc: Fn(&mut A, &T) + Send + Sync + 'static,
    Com: Fn(&mut A, A) + Send + Sync + 'static,
    Fin: Fn(A) -> R + Send + Sync + 'static,
{
    type Acc = A;
    type Output = R;
    fn create(&self) -> A {
        (self.create)()
    }
    fn accumulate(&self, acc: &mut A, item: &T) {
        (self.accumulate)(acc, item)
    }
    fn combine(&self, acc: &mut A, other: A) {
        (self.combine)(acc, other)
    }
    fn finish(&self, acc: A) -> R {
        (self.finish)(acc)
    }
    fn has_deduct(&self) -> bool {
        self.deduct.is_some()
    }
    fn deduct(&self, acc: &mut A, other: &A) {
        if let Some(d) = &self.deduct {
            d(acc, other)
        }
    }
}

/// The counts of one instance of a keyed count (`weir::BatchStage::count_keys`): the table
/// its function adds each key it finds to.
///
/// A key already in the table is looked up by a borrowed form (`&str` for a `String` or
/// `CompactString` key), so counting it builds nothing; only a key seen for the first time is
/// made into a `K`, once.
///
/// ```
/// use weir::aggregate::KeyCounter;
///
/// let mut counts = KeyCounter::<String>::default();
/// for word in "to be or not to be".split(' ') {
///     counts.add(word);
/// }
/// counts.add_n("be", 3);
/// assert_eq!(counts.get("be"), 5);
/// assert_eq!(counts.len(), 4);
/// ```
///
/// Cost: one hash of the key and one probe of an `FxHashMap<K, u64>` per call; a `K` built
/// and inserted for a new key.
#[derive(Debug, Clone)]
pub struct KeyCounter<K> {
    counts: FxHashMap<K, u64>,
}

impl<K> Default for KeyCounter<K> {
    fn default() -> Self {
        KeyCounter {
            counts: FxHashMap::default(),
        }
    }
}

impl<K: Hash + Eq> KeyCounter<K> {
    /// Counts one occurrence of `key`.
    #[inline]
    pub fn add<Q>(&mut self, key: &Q)
    where
        K: Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.add_n(key, 1);
    }

    /// Counts `n` occurrences of `key`.
    #[inline]
    pub fn add_n<Q>(&mut self, key: &Q, n: u64)
    where
        K: Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized,
    {
        match self.counts.get_mut(key) {
            Some(count) => *count += n,
            None => {
                self.counts.insert(K::from(key), n);
            }
        }
    }

    /// Counts `n` occurrences of an owned `key`: for keys that have no borrowed form, such as
    /// numbers.
    #[inline]
    pub fn add_owned(&mut self, key: K, n: u64) {
        *self.counts.entry(key).or_insert(0) += n;
    }

    /// The count of `key` so far: 0 for a key never added.
    pub fn get<Q>(&self, key: &Q) -> u64
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.counts.get(key).copied().unwrap_or(0)
    }

    /// How many distinct keys were counted.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Takes the table out, leaving the counter empty.
    pub fn take(&mut self) -> FxHashMap<K, u64> {
        std::mem::take(&mut self.counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fold<T, Op: AggregateOperation<T>>(op: &Op, items: &[T]) -> Op::Acc {
        let mut acc = op.create();
        for i in items {
            op.accumulate(&mut acc, i);
        }
        acc
    }

    #[test]
    fn builtins() {
        let xs = [5i64, 3, 9, 1];
        assert_eq!(
            AggregateOperation::<i64>::finish(&counting(), fold(&counting(), &xs)),
            4
        );
        assert_eq!(
            summing(|x: &i64| *x).finish(fold(&summing(|x: &i64| *x), &xs)),
            18
        );
        assert_eq!(
            min_by(|x: &i64| *x).finish(fold(&min_by(|x: &i64| *x), &xs)),
            Some(1)
        );
        assert_eq!(
            max_by(|x: &i64| *x).finish(fold(&max_by(|x: &i64| *x), &xs)),
            Some(9)
        );
        assert_eq!(
            top_n(2, |x: &i64| *x).finish(fold(&top_n(2, |x: &i64| *x), &xs)),
            vec![9, 5]
        );
        assert_eq!(ToList.finish(fold(&ToList, &xs)), xs.to_vec());
        assert_eq!(ToSet.finish(fold(&ToSet, &[1, 1, 2])).len(), 2);
        assert!(averaging(|x: &i64| *x as f64).finish((0, 0.0)).is_nan());
    }

    #[test]
    fn custom_with_deduct() {
        let op = aggregate_operation(
            || 0i64,
            |a: &mut i64, x: &i64| *a += x,
            |a, b| *a += b,
            |a| a * 2,
        )
        .with_deduct(|a, b| *a -= b);
        let mut acc = fold(&op, &[1, 2, 3]);
        assert!(op.has_deduct());
        op.deduct(&mut acc, &2);
        assert_eq!(op.finish(acc), 8);
    }

    #[test]
    fn key_counter_counts_borrowed_and_owned_keys() {
        let mut words = KeyCounter::<String>::default();
        assert!(words.is_empty());
        words.add("a");
        words.add_n("b", 2);
        words.add_owned("a".to_string(), 3);
        assert_eq!((words.get("a"), words.get("b"), words.get("c")), (4, 2, 0));
        let mut table: Vec<_> = words.take().into_iter().collect();
        table.sort();
        assert_eq!(table, [("a".to_string(), 4), ("b".to_string(), 2)]);
        assert!(words.is_empty());
        let mut numbers = KeyCounter::<u64>::default();
        numbers.add_owned(7, 1);
        numbers.add_owned(7, 2);
        assert_eq!((numbers.get(&7), numbers.len()), (3, 1));
    }

    proptest! {
        /// A key counter counts what a plain map of owned keys counts.
        #[test]
        fn key_counter_matches_a_plain_count(keys in prop::collection::vec("[a-c]{0,2}", 0..60)) {
            let mut counter = KeyCounter::<String>::default();
            let mut plain = std::collections::HashMap::<String, u64>::new();
            for key in &keys {
                counter.add(key.as_str());
                *plain.entry(key.clone()).or_default() += 1;
            }
            prop_assert_eq!(counter.len(), plain.len());
            let counted: std::collections::HashMap<String, u64> = counter.take().into_iter().collect();
            prop_assert_eq!(counted, plain);
        }

        /// Splitting the input, accumulating the parts and combining gives the same result as
        /// one pass; and deduct undoes combine.
        #[test]
        fn combine_is_consistent(xs in proptest::collection::vec(-1000i64..1000, 0..50), split in 0usize..50) {
            let split = split.min(xs.len());
            let op = all_of((counting(), summing(|x: &i64| *x), top_n(3, |x: &i64| *x), min_by(|x: &i64| *x)));
            let whole = op.finish(fold(&op, &xs));
            let mut left = fold(&op, &xs[..split]);
            op.combine(&mut left, fold(&op, &xs[split..]));
            prop_assert_eq!(op.finish(left), whole);

            let sums = all_of((counting(), summing(|x: &i64| *x)));
            let mut acc = fold(&sums, &xs);
            sums.deduct(&mut acc, &fold(&sums, &xs[split..]));
            prop_assert_eq!(sums.finish(acc), sums.finish(fold(&sums, &xs[..split])));
        }
    }
}
