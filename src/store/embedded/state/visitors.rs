//! The gate's state per visitor, in one table: the rate-limit log of
//! `gate.visitor_limit_per_minute` and the behaviour rule's state
//! (`gate.bot_articles_per_minute`, [`Behaviour`]).
//!
//! Most visitors view one article a minute: their state is one admission
//! at `t` and one view of article `a` at the same `t`. That state lives in
//! the visitor's 24-byte slot of a [`SlotMap`] (the visitor whole, so
//! every decision stays exact, and `t` and `a`); any other state (more
//! admissions or views in the window, a quarantine, a time the slot cannot
//! hold) lives in a side table the slot points into, and moves back into
//! the slot once it fits again. Two hash tables of 48-byte entries (the
//! rate logs and the behaviour rule's) held 192 bytes a visitor at 1 M
//! visitors (examples/gate_memory.rs).
//!
//! The slot leaves out the visitor's top [`SHARD_BITS`] bits: they are its
//! sub-table's index. Visitors are SipHash values under the site's secret
//! key ([`crate::gate::KeyedMap`]), so no client can steer them into one
//! sub-table.
//!
//! Snapshots hold the rate logs as the [`SlidingLimiter`] they replaced
//! wrote them (the same bytes); the behaviour rule's state is derived from
//! counted views and not kept, as before.

use std::borrow::Cow;

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::article::Idx;
use super::behaviour::Behaviour;
use super::slots::{SHARDS, Slot, SlotMap};
use crate::gate::{AdmissionLog, SlidingLimiter, log_allows, log_record};

/// Top bits of a visitor that name its sub-table, left out of its slot.
const SHARD_BITS: u32 = SHARDS.ilog2();
/// Bits of the visitor's high half a slot holds.
const KEY_BITS: u32 = 64 - SHARD_BITS;
const KEY_MASK: u64 = (1 << KEY_BITS) - 1;
/// The slot's kind: the top 3 bits of its first word.
const TAG_SHIFT: u32 = 61;
/// A slot's time: milliseconds since [`EPOCH_MS`], 32 bits in the third
/// word's high half and the rest between the tag and the key.
const TIME_BITS: u32 = 32 + TAG_SHIFT - KEY_BITS;
/// 2024-01-01 UTC: slots hold times up to 2041 (2^39 ms on); any other
/// time goes to the side table.
const EPOCH_MS: i64 = 1_704_067_200_000;

const EMPTY: u64 = 0;
/// One admission at `t` (rate log `[t]`).
const ADMITTED: u64 = 1;
/// One view of article `a` at `t` (behaviour views `[(t, a)]`).
const VIEWED: u64 = 2;
/// Both, at the same `t`.
const BOTH: u64 = ADMITTED | VIEWED;
/// The state is in the side table, at the index the third word holds.
const SPILLED: u64 = 4;

/// Everything the gate keeps for one visitor.
#[derive(Debug, Clone, Default)]
pub struct VisitorState {
    /// Admission times inside the rate limit's window, oldest first.
    pub(super) log: AdmissionLog,
    pub(super) behaviour: Behaviour,
}

impl VisitorState {
    /// Nothing held: the same as no entry.
    fn is_blank(&self) -> bool {
        self.log.is_empty() && self.behaviour.bot_until_ms == 0 && self.behaviour.views.is_empty()
    }

    /// The newest time held.
    fn newest(&self) -> Option<i64> {
        let view = self.behaviour.views.last().map(|&(t, _)| t);
        self.log.last().copied().max(view)
    }
}

/// Bytes of one visitor's slot.
#[cfg(test)]
pub const SLOT_BYTES: usize = std::mem::size_of::<VisitorSlot>();

/// One visitor's slot: 24 bytes.
#[derive(Clone, Copy, Debug)]
struct VisitorSlot {
    /// Tag (3 bits), the time's high bits, the visitor's high half less
    /// its sub-table bits.
    hi: u64,
    /// The visitor's low half.
    lo: u64,
    /// The time's low 32 bits and the article; or the side table's index.
    word: u64,
}

impl Slot for VisitorSlot {
    type Key = u128;
    const EMPTY: Self = VisitorSlot {
        hi: EMPTY,
        lo: 0,
        word: 0,
    };

    fn is_empty(&self) -> bool {
        self.tag() == EMPTY
    }

    fn key(&self, shard: usize) -> u128 {
        let hi = (shard as u64) << KEY_BITS | (self.hi & KEY_MASK);
        u128::from(hi) << 64 | u128::from(self.lo)
    }

    fn shard(key: &u128, _h: u64) -> usize {
        (key >> (128 - SHARD_BITS)) as usize
    }
}

impl VisitorSlot {
    fn tag(&self) -> u64 {
        self.hi >> TAG_SHIFT
    }

    fn new(v: u128, tag: u64, high: u64, word: u64) -> Self {
        VisitorSlot {
            hi: tag << TAG_SHIFT | high << KEY_BITS | ((v >> 64) as u64 & KEY_MASK),
            lo: v as u64,
            word,
        }
    }

    /// `state` of visitor `v` held in the slot alone, if it fits.
    fn inline(v: u128, state: &VisitorState) -> Option<Self> {
        if state.behaviour.bot_until_ms != 0 {
            return None;
        }
        let (tag, t, idx) = match (&state.log[..], &state.behaviour.views[..]) {
            (&[t], []) => (ADMITTED, t, 0),
            ([], &[(t, idx)]) => (VIEWED, t, idx),
            (&[t], &[(u, idx)]) if t == u => (BOTH, t, idx),
            _ => return None,
        };
        let rel = (t.checked_sub(EPOCH_MS))
            .and_then(|r| u64::try_from(r).ok())
            .filter(|&r| r < 1 << TIME_BITS)?;
        Some(Self::new(
            v,
            tag,
            rel >> 32,
            (rel & 0xffff_ffff) << 32 | u64::from(idx),
        ))
    }

    fn spilled(v: u128, at: usize) -> Self {
        Self::new(v, SPILLED, 0, at as u64)
    }

    /// The state an inline slot holds.
    fn unpack(&self) -> VisitorState {
        let high = (self.hi >> KEY_BITS) & ((1 << (TAG_SHIFT - KEY_BITS)) - 1);
        let t = EPOCH_MS + (high << 32 | self.word >> 32) as i64;
        let idx = self.word as Idx;
        let mut s = VisitorState::default();
        if self.tag() & ADMITTED != 0 {
            s.log.push(t);
        }
        if self.tag() & VIEWED != 0 {
            s.behaviour.views.push((t, idx));
        }
        s
    }
}

/// The gate's per-visitor state: a [`SlotMap`] of [`VisitorSlot`]s and
/// the side table of the states that do not fit one.
#[derive(Debug, Clone)]
pub struct Visitors {
    /// Most admissions per window (`gate.visitor_limit_per_minute`; 0:
    /// off), and the window.
    limit: usize,
    window_ms: i64,
    map: SlotMap<VisitorSlot>,
    side: Vec<VisitorState>,
    /// Indexes of `side` no slot points to.
    free: Vec<u32>,
}

impl Visitors {
    /// `limit` admissions per `window_ms` at most (0: no limit).
    pub fn new(limit: u32, window_ms: i64) -> Self {
        Visitors {
            limit: limit as usize,
            window_ms,
            map: SlotMap::default(),
            side: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Changes the limit (after a restart with new configuration).
    pub fn set_limit(&mut self, limit: u32) {
        self.limit = limit as usize;
    }

    fn unpack(&self, slot: &VisitorSlot) -> Cow<'_, VisitorState> {
        if slot.tag() == SPILLED {
            Cow::Borrowed(&self.side[slot.word as usize])
        } else {
            Cow::Owned(slot.unpack())
        }
    }

    /// Visitor `v`'s state, if any.
    pub fn get(&self, v: &u128) -> Option<Cow<'_, VisitorState>> {
        self.map.get(v).map(|slot| self.unpack(slot))
    }

    /// Whether the rate limit admits an event of `v` at `now_ms`.
    #[cfg(test)]
    pub fn allows(&self, v: &u128, now_ms: i64) -> bool {
        self.admits(self.get(v).as_deref(), now_ms)
    }

    /// [`Self::allows`] for a visitor whose state is `state`.
    pub fn admits(&self, state: Option<&VisitorState>, now_ms: i64) -> bool {
        self.limit == 0
            || state.is_none_or(|s| log_allows(&s.log, self.limit, self.window_ms, now_ms))
    }

    /// Records an admission of `v` at `now_ms` in its rate log.
    pub fn record(&mut self, v: u128, now_ms: i64) {
        if self.limit > 0 {
            let (limit, window) = (self.limit, self.window_ms);
            self.update(v, |s| log_record(&mut s.log, limit, window, now_ms));
        }
    }

    /// A counted event of `v` at `now_ms`: an admission, and a view of
    /// article `viewed` for the behaviour rule.
    pub fn counted(&mut self, v: u128, now_ms: i64, viewed: Option<Idx>) {
        if self.limit == 0 && viewed.is_none() {
            return;
        }
        let (limit, window) = (self.limit, self.window_ms);
        self.update(v, |s| {
            if limit > 0 {
                log_record(&mut s.log, limit, window, now_ms);
            }
            if let Some(idx) = viewed {
                s.behaviour.viewed(now_ms, idx);
            }
        });
    }

    /// Changes `v`'s state by `f` (from a blank one if it has none); a
    /// state left blank is dropped, one that fits its slot goes back in.
    pub fn update<R>(&mut self, v: u128, f: impl FnOnce(&mut VisitorState) -> R) -> R {
        let Some(slot) = self.map.get_mut(&v) else {
            let mut s = VisitorState::default();
            let r = f(&mut s);
            if !s.is_blank() {
                let slot = match VisitorSlot::inline(v, &s) {
                    Some(slot) => slot,
                    None => VisitorSlot::spilled(v, keep(&mut self.side, &mut self.free, s)),
                };
                self.map.insert_absent(&v, slot);
            }
            return r;
        };
        let held = *slot;
        let at = (held.tag() == SPILLED).then_some(held.word as usize);
        let mut s = match at {
            Some(at) => std::mem::take(&mut self.side[at]),
            None => held.unpack(),
        };
        let r = f(&mut s);
        // The slot is written through the one lookup above; only a state
        // left blank (rare) looks it up again to remove it.
        match (s.is_blank(), VisitorSlot::inline(v, &s), at) {
            (true, _, _) => {
                self.map.remove(&v);
                if let Some(at) = at {
                    self.free.push(at as u32);
                }
            }
            (false, Some(new), _) => {
                *slot = new;
                if let Some(at) = at {
                    self.free.push(at as u32);
                }
            }
            (false, None, Some(at)) => self.side[at] = s,
            (false, None, None) => {
                *slot = VisitorSlot::spilled(v, keep(&mut self.side, &mut self.free, s));
            }
        }
        r
    }

    /// Forgets, in sub-table `i` (of [`SHARDS`]), the rate logs with
    /// nothing inside the window and the behaviour states no longer live
    /// at `now_ms` (the sweeps of the two tables this one replaced).
    pub fn sweep_shard(&mut self, i: usize, now_ms: i64) {
        let Visitors {
            window_ms,
            map,
            side,
            free,
            ..
        } = self;
        let horizon = now_ms - *window_ms;
        map.retain_shard(i, |slot| {
            let at = (slot.tag() == SPILLED).then_some(slot.word as usize);
            let mut s = match at {
                Some(at) => std::mem::take(&mut side[at]),
                None => slot.unpack(),
            };
            if s.log.last().is_none_or(|&t| t <= horizon) {
                s.log.clear();
            }
            if !s.behaviour.live(now_ms) {
                s.behaviour = Behaviour::default();
            }
            let v = slot.key(i);
            let inline = (!s.is_blank()).then(|| VisitorSlot::inline(v, &s));
            match (at, inline) {
                (_, None) => {
                    free.extend(at.map(|at| at as u32));
                    false
                }
                (_, Some(Some(new))) => {
                    free.extend(at.map(|at| at as u32));
                    *slot = new;
                    true
                }
                (Some(at), Some(None)) => {
                    side[at] = s;
                    true
                }
                (None, Some(None)) => unreachable!("a swept inline state fits its slot"),
            }
        });
    }

    /// The newest time any visitor's state holds.
    pub fn newest(&self) -> Option<i64> {
        (self.map.iter())
            .filter_map(|(_, slot)| self.unpack(slot).newest())
            .max()
    }

    /// Every visitor's rate log that holds any time (for dumps and
    /// snapshots).
    pub fn logs(&self) -> impl Iterator<Item = (u128, AdmissionLog)> + '_ {
        self.map.iter().filter_map(|(i, slot)| {
            let s = self.unpack(slot);
            (!s.log.is_empty()).then(|| (slot.key(i), s.log.clone()))
        })
    }

    /// Replaces one visitor's rate log (loading a dump).
    pub fn set_log(&mut self, v: u128, log: Vec<i64>) {
        if !log.is_empty() {
            self.update(v, |s| s.log = AdmissionLog::from_vec(log));
        }
    }

    /// Visitors with any state.
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// Bytes held on the heap: slots, the side table and what its states
    /// hold outside it.
    pub fn heap_bytes(&self) -> usize {
        let outside = |s: &VisitorState| {
            let log = if s.log.spilled() {
                s.log.capacity() * std::mem::size_of::<i64>()
            } else {
                0
            };
            let views = if s.behaviour.views.spilled() {
                s.behaviour.views.capacity() * std::mem::size_of::<(i64, Idx)>()
            } else {
                0
            };
            log + views
        };
        self.map.heap_bytes()
            + self.side.capacity() * std::mem::size_of::<VisitorState>()
            + self.side.iter().map(outside).sum::<usize>()
            + self.free.capacity() * 4
    }
}

/// Puts `s` in the side table `side` (at a `free` index if any); returns
/// where.
fn keep(side: &mut Vec<VisitorState>, free: &mut Vec<u32>, s: VisitorState) -> usize {
    match free.pop() {
        Some(at) => {
            side[at as usize] = s;
            at as usize
        }
        None => {
            side.push(s);
            side.len() - 1
        }
    }
}

/// The rate logs, as the map of a [`SlidingLimiter`].
struct Logs<'a>(&'a Visitors);

impl Serialize for Logs<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(Some(self.0.logs().count()))?;
        for (v, log) in self.0.logs() {
            m.serialize_entry(&v, &log)?;
        }
        m.end()
    }
}

/// Written as the [`SlidingLimiter`] of the rate logs it replaced: the
/// same fields, the same bytes.
impl Serialize for Visitors {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut st = ser.serialize_struct("SlidingLimiter", 3)?;
        st.serialize_field("limit", &self.limit)?;
        st.serialize_field("window_ms", &self.window_ms)?;
        st.serialize_field("logs", &Logs(self))?;
        st.end()
    }
}

impl<'de> Deserialize<'de> for Visitors {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        SlidingLimiter::<u128>::deserialize(de).map(Visitors::from)
    }
}

impl From<SlidingLimiter<u128>> for Visitors {
    fn from(l: SlidingLimiter<u128>) -> Self {
        let (limit, window_ms) = l.rule();
        let mut v = Visitors {
            limit,
            ..Visitors::new(0, window_ms)
        };
        for (k, log) in l.into_logs() {
            v.set_log(k, log.into_vec());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::embedded::state::behaviour::BEHAVIOUR_MS;
    use proptest::prelude::*;
    use std::collections::HashMap;

    const LIMIT: u32 = 3;
    const WINDOW: i64 = 60_000;

    /// Visitors that differ in their top (sub-table) bits, their middle and
    /// their low bits.
    fn visitor(n: u8) -> u128 {
        let n = u128::from(n % 6);
        (n % 3) << 126 | (n / 3) << 70 | n
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// A counted event: with the view of this article if `Some`.
        Counted(u8, i64, Option<Idx>),
        Duplicate(u8, i64),
        Quarantine(u8, i64),
        Sweep(i64, usize),
    }

    /// Times in the slots' range, before it, and at its end.
    fn time() -> impl Strategy<Value = i64> {
        let end = EPOCH_MS + (1 << TIME_BITS);
        prop_oneof![
            8 => EPOCH_MS..EPOCH_MS + 200_000,
            1 => EPOCH_MS - 100_000..EPOCH_MS,
            1 => end - 100_000..end + 100_000,
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (any::<u8>(), time(), proptest::option::of(0..4u32))
                .prop_map(|(v, t, a)| Op::Counted(v, t, a)),
            2 => (any::<u8>(), time()).prop_map(|(v, t)| Op::Duplicate(v, t)),
            1 => (any::<u8>(), time()).prop_map(|(v, t)| Op::Quarantine(v, t)),
            2 => (time(), prop_oneof![Just(0), Just(256), Just(512), 0..SHARDS])
                .prop_map(|(t, i)| Op::Sweep(t, i)),
        ]
    }

    /// The two tables this one replaced: a sliding limiter and a map of
    /// behaviour states.
    #[derive(Default)]
    struct Oracle {
        logs: HashMap<u128, AdmissionLog>,
        behaviour: HashMap<u128, Behaviour>,
    }

    fn check(ops: &[Op], limit: u32) {
        let mut t = Visitors::new(limit, WINDOW);
        let mut o = Oracle::default();
        let shard = |v: u128| (v >> (128 - SHARD_BITS)) as usize;
        for op in ops {
            match *op {
                Op::Counted(n, now, viewed) => {
                    let v = visitor(n);
                    t.counted(v, now, viewed);
                    if limit > 0 {
                        log_record(o.logs.entry(v).or_default(), limit as usize, WINDOW, now);
                    }
                    if let Some(a) = viewed {
                        o.behaviour.entry(v).or_default().viewed(now, a);
                    }
                }
                Op::Duplicate(n, now) => {
                    let v = visitor(n);
                    t.record(v, now);
                    if limit > 0 {
                        log_record(o.logs.entry(v).or_default(), limit as usize, WINDOW, now);
                    }
                }
                Op::Quarantine(n, now) => {
                    let v = visitor(n);
                    t.update(v, |s| s.behaviour.quarantine(now, 5_000));
                    o.behaviour.entry(v).or_default().quarantine(now, 5_000);
                }
                Op::Sweep(now, i) => {
                    t.sweep_shard(i, now);
                    (o.logs).retain(|&v, log| {
                        shard(v) != i || log.last().is_some_and(|&x| x > now - WINDOW)
                    });
                    (o.behaviour).retain(|&v, b| shard(v) != i || b.live(now));
                }
            }
            for n in 0..6 {
                let v = visitor(n);
                let s = t.get(&v);
                let log = s.as_ref().map_or(&[][..], |s| &s.log[..]);
                let want = o.logs.get(&v).map_or(&[][..], |l| &l[..]);
                assert_eq!(log, want, "log of {n} after {op:?}");
                let b = s.as_ref().map(|s| &s.behaviour);
                let ob = o.behaviour.get(&v);
                let until = |b: Option<&Behaviour>| b.map_or(0, |b| b.bot_until_ms);
                let views = |b: Option<&Behaviour>| b.map_or(vec![], |b| b.views.to_vec());
                assert_eq!(until(b), until(ob));
                assert_eq!(views(b), views(ob));
                for now in [EPOCH_MS + 100_000, EPOCH_MS - 50_000] {
                    let want = limit == 0
                        || o.logs
                            .get(&v)
                            .is_none_or(|l| log_allows(l, limit as usize, WINDOW, now));
                    assert_eq!(t.allows(&v, now), want);
                }
            }
        }
        let newest = (o.logs.values().filter_map(|l| l.last().copied()))
            .chain(
                o.behaviour
                    .values()
                    .filter_map(|b| b.views.last().map(|x| x.0)),
            )
            .max();
        assert_eq!(t.newest(), newest);
        // Side-table states not pointed to are all on the free list.
        let pointed = t.map.iter().filter(|(_, s)| s.tag() == SPILLED).count();
        assert_eq!(pointed + t.free.len(), t.side.len());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Answers as the sliding limiter and the behaviour map it replaced.
        #[test]
        fn answers_as_the_limiter_and_behaviour_map(
            ops in proptest::collection::vec(op(), 0..300),
            limit in prop_oneof![Just(0u32), Just(1), Just(LIMIT)],
        ) {
            check(&ops, limit);
        }
    }

    /// One view a minute: the state stays in the slot, nothing on the side.
    #[test]
    fn one_view_a_minute_stays_in_the_slot() {
        let mut t = Visitors::new(60, WINDOW);
        let v = u128::MAX - 7;
        for m in 0..10 {
            let now = EPOCH_MS + 1_000_000 + m * (BEHAVIOUR_MS + 1);
            assert!(t.allows(&v, now));
            t.counted(v, now, Some(m as Idx));
            assert!(t.side.iter().all(VisitorState::is_blank), "minute {m}");
            assert_eq!(t.get(&v).unwrap().log[..], [now]);
        }
        // A second view inside the minute goes to the side table, and
        // comes back once the first leaves the window.
        let now = EPOCH_MS + 1_000_000 + 10 * (BEHAVIOUR_MS + 1);
        t.counted(v, now, Some(1));
        t.counted(v, now + 10, Some(2));
        assert!(t.map.iter().all(|(_, s)| s.tag() == SPILLED));
        t.counted(v, now + WINDOW + 20, Some(3));
        assert!(t.map.iter().all(|(_, s)| s.tag() == BOTH));
        assert_eq!(t.len(), 1);
        assert_eq!(std::mem::size_of::<VisitorSlot>(), 24);
    }

    /// Snapshots: the rate logs are written as the `SlidingLimiter` wrote
    /// them, and read back from its bytes.
    #[test]
    fn writes_and_reads_the_sliding_limiters_bytes() {
        let mut l = SlidingLimiter::<u128>::new(LIMIT, WINDOW);
        l.record(u128::MAX, EPOCH_MS + 5);
        let one = postcard::to_allocvec(&l).unwrap();
        let t: Visitors = postcard::from_bytes(&one).unwrap();
        assert_eq!(postcard::to_allocvec(&t).unwrap(), one);
        for (n, now) in [(1u128 << 127, 7), (3, EPOCH_MS), (3, EPOCH_MS + 9)] {
            l.record(n, now);
        }
        let bytes = postcard::to_allocvec(&l).unwrap();
        let t: Visitors = postcard::from_bytes(&bytes).unwrap();
        let back: SlidingLimiter<u128> =
            postcard::from_bytes(&postcard::to_allocvec(&t).unwrap()).unwrap();
        assert_eq!(back.rule(), l.rule());
        let sorted = |l: &SlidingLimiter<u128>| {
            let mut v: Vec<(u128, Vec<i64>)> = l.logs().map(|(k, g)| (*k, g.to_vec())).collect();
            v.sort();
            v
        };
        assert_eq!(sorted(&back), sorted(&l));
    }
}
