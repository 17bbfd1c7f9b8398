//! Log-structured memory for the row cache: entries are appended to fixed
//! 1 MiB segments instead of each being its own heap allocation.
//!
//! Why: a general-purpose allocator rounds a ~1 KiB item up to its next
//! size class (mimalloc: 1280 bytes for 1060), which alone costs more than
//! memcached's whole per-item overhead. Here an entry takes its bytes plus
//! an 8-byte record header, and the holes evicted entries leave are
//! reclaimed by compacting a segment — moving its live records together
//! and telling their slots — as ScyllaDB's LSA does.
//!
//! A record is `[slot u32][len u32][body]`; it is live iff its slot is in
//! use and points back at it, so records of evicted or replaced entries
//! need no marking. Invariants: a segment's `live_bytes` is the sum of its
//! live records' lengths; records only ever move to lower offsets (in-place
//! compaction) or into the open segment.

use crate::cache::slots::{Location, Slots, FREE, NIL};

pub(crate) const SEGMENT_BYTES: usize = 1 << 20;
pub(crate) const RECORD_HEADER_BYTES: usize = 8;

struct Segment {
    data: Box<[u8]>,
    used: usize,
    live_bytes: usize,
}

impl Segment {
    fn dead_bytes(&self) -> usize {
        self.used - self.live_bytes
    }

    fn record_at(&self, offset: usize) -> (u32, usize) {
        let word =
            |at: usize| u32::from_le_bytes([self.data[at], self.data[at + 1], self.data[at + 2], self.data[at + 3]]);
        (word(offset), word(offset + 4) as usize)
    }
}

pub(crate) struct Segments {
    /// By id; `None` for ids whose memory was given back.
    segments: Vec<Option<Segment>>,
    released: Vec<u32>,
    /// Where new records go; `NIL` when none is open.
    open: u32,
    allocated: usize,
}

impl Segments {
    pub(crate) fn new() -> Segments {
        Segments { segments: Vec::new(), released: Vec::new(), open: NIL, allocated: 0 }
    }

    /// The segments' own memory.
    pub(crate) fn segment_bytes(&self) -> usize {
        self.allocated * SEGMENT_BYTES
    }

    /// The table of segments.
    pub(crate) fn table_bytes(&self) -> usize {
        self.segments.capacity() * std::mem::size_of::<Option<Segment>>()
    }

    #[cfg(test)]
    pub(crate) fn live_bytes(&self) -> usize {
        self.segments.iter().flatten().map(|s| s.live_bytes).sum()
    }

    /// The largest record a segment can take.
    pub(crate) fn fits(record_bytes: usize) -> bool {
        record_bytes <= SEGMENT_BYTES
    }

    fn segment(&self, id: u32) -> &Segment {
        // Invariant: locations and `open` name allocated segments only.
        #[allow(clippy::unwrap_used)]
        self.segments[id as usize].as_ref().unwrap()
    }

    fn segment_mut(&mut self, id: u32) -> &mut Segment {
        // Invariant: as in `segment`.
        #[allow(clippy::unwrap_used)]
        self.segments[id as usize].as_mut().unwrap()
    }

    /// Appends a record for `slot` to the open segment if it has room.
    pub(crate) fn append(&mut self, slot: u32, body: &[u8]) -> Option<Location> {
        let len = RECORD_HEADER_BYTES + body.len();
        if self.open == NIL || self.segment(self.open).used + len > SEGMENT_BYTES {
            return None;
        }
        let open = self.open;
        let segment = self.segment_mut(open);
        let offset = segment.used;
        segment.data[offset..offset + 4].copy_from_slice(&slot.to_le_bytes());
        segment.data[offset + 4..offset + 8].copy_from_slice(&(len as u32).to_le_bytes());
        segment.data[offset + 8..offset + len].copy_from_slice(body);
        segment.used += len;
        segment.live_bytes += len;
        Some(Location { segment: open, offset: offset as u32 })
    }

    /// The body of the record at `at`.
    pub(crate) fn body(&self, at: Location) -> &[u8] {
        let segment = self.segment(at.segment);
        let offset = at.offset as usize;
        let (_, len) = segment.record_at(offset);
        &segment.data[offset + RECORD_HEADER_BYTES..offset + len]
    }

    pub(crate) fn record_bytes(&self, at: Location) -> usize {
        self.segment(at.segment).record_at(at.offset as usize).1
    }

    /// The record at `at` is no longer live (its slot was freed or moved).
    pub(crate) fn kill(&mut self, at: Location) {
        let len = self.record_bytes(at);
        let segment = self.segment_mut(at.segment);
        assert!(segment.live_bytes >= len, "segment {} live bytes underflow", at.segment);
        segment.live_bytes -= len;
    }

    /// Opens a new, empty segment for appends.
    pub(crate) fn open_new(&mut self) {
        let segment = Segment { data: vec![0u8; SEGMENT_BYTES].into_boxed_slice(), used: 0, live_bytes: 0 };
        let id = match self.released.pop() {
            Some(id) => {
                self.segments[id as usize] = Some(segment);
                id
            }
            None => {
                self.segments.push(Some(segment));
                (self.segments.len() - 1) as u32
            }
        };
        self.allocated += 1;
        self.open = id;
    }

    /// The allocated segment, other than `except`, that scores highest by
    /// `by`.
    fn pick(&self, except: u32, by: impl Fn(&Segment) -> usize) -> Option<u32> {
        let ids = self.segments.iter().enumerate().filter_map(|(id, s)| Some((id as u32, s.as_ref()?)));
        ids.filter(|(id, _)| *id != except).max_by_key(|(_, s)| by(s)).map(|(id, _)| id)
    }

    /// Makes room for a record of `len` bytes without allocating: compacts
    /// the segment with the most dead bytes in place and opens it, if it
    /// frees at least `len` and `min_gain` bytes. Returns whether it did.
    pub(crate) fn compact_for(&mut self, len: usize, min_gain: usize, slots: &mut Slots) -> bool {
        let Some(id) = self.pick(NIL, Segment::dead_bytes) else { return false };
        let dead = self.segment(id).dead_bytes();
        if dead < len.max(min_gain) {
            return false;
        }
        self.compact_in_place(id, slots);
        self.open = id;
        true
    }

    /// Moves the live records of `id` to the start of the segment.
    fn compact_in_place(&mut self, id: u32, slots: &mut Slots) {
        let segment = self.segment_mut(id);
        let (mut read, mut write) = (0, 0);
        while read < segment.used {
            let (slot, len) = segment.record_at(read);
            let live = is_live(slots, slot, Location { segment: id, offset: read as u32 });
            if live {
                if write != read {
                    segment.data.copy_within(read..read + len, write);
                    slots.set_location(slot, Location { segment: id, offset: write as u32 });
                }
                write += len;
            }
            read += len;
        }
        assert_eq!(write, segment.live_bytes, "segment {id}: live records disagree with its count");
        segment.used = write;
    }

    /// Gives back one segment's memory: an empty one at once; else the one
    /// with the fewest live bytes, once its records fit in the open
    /// segment (after compacting another to open it). Returns false when
    /// no segment can go without evicting first.
    pub(crate) fn release_one(&mut self, slots: &mut Slots) -> bool {
        let Some(victim) = self.pick(NIL, |s| usize::MAX - s.live_bytes) else { return false };
        let live = self.segment(victim).live_bytes;
        if live > 0 {
            let open_room = match self.open {
                NIL => 0,
                open if open == victim => 0,
                open => SEGMENT_BYTES - self.segment(open).used,
            };
            if open_room < live {
                // Compact the segment (other than the victim) with the most
                // dead bytes and move into it.
                let target = self.pick(victim, Segment::dead_bytes);
                let Some(target) = target.filter(|t| self.segment(*t).dead_bytes() >= live) else { return false };
                self.compact_in_place(target, slots);
                self.open = target;
            }
            self.move_records(victim, slots);
        }
        if self.open == victim {
            self.open = NIL;
        }
        self.segments[victim as usize] = None;
        self.released.push(victim);
        self.allocated -= 1;
        true
    }

    /// Moves every live record of `from` into the open segment, which has
    /// room for them all.
    fn move_records(&mut self, from: u32, slots: &mut Slots) {
        let mut offset = 0;
        while offset < self.segment(from).used {
            let (slot, len) = self.segment(from).record_at(offset);
            let at = Location { segment: from, offset: offset as u32 };
            if is_live(slots, slot, at) {
                let body = self.body(at).to_vec();
                // Invariant: the caller made room for all live records.
                #[allow(clippy::unwrap_used)]
                let moved = self.append(slot, &body).unwrap();
                slots.set_location(slot, moved);
                self.segment_mut(from).live_bytes -= len;
            }
            offset += len;
        }
        assert_eq!(self.segment(from).live_bytes, 0, "segment {from} kept live records");
    }
}

fn is_live(slots: &Slots, slot: u32, at: Location) -> bool {
    let s = slots.get(slot);
    s.table != FREE && s.location == at
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends a record of `len` body bytes, each `fill`, for a new slot.
    fn add(segments: &mut Segments, slots: &mut Slots, len: usize, fill: u8) -> u32 {
        let slot = slots.allocate(1, 0, Location { segment: 0, offset: 0 }, false);
        let body = vec![fill; len];
        let at = match segments.append(slot, &body) {
            Some(at) => at,
            None => {
                segments.open_new();
                segments.append(slot, &body).expect("an empty segment takes it")
            }
        };
        slots.set_location(slot, at);
        slot
    }

    fn remove(segments: &mut Segments, slots: &mut Slots, slot: u32) {
        segments.kill(slots.get(slot).location);
        slots.free(slot);
    }

    #[test]
    fn compaction_moves_live_records_and_keeps_their_bytes() {
        let (mut segments, mut slots) = (Segments::new(), Slots::new());
        let ids: Vec<u32> = (0..100u8).map(|i| add(&mut segments, &mut slots, 10_000, i)).collect();
        assert_eq!(segments.allocated, 1);
        for id in ids.iter().step_by(2) {
            remove(&mut segments, &mut slots, *id);
        }
        assert_eq!(segments.live_bytes(), 50 * (10_000 + RECORD_HEADER_BYTES));
        assert!(segments.compact_for(10_000, 0, &mut slots));
        for (i, id) in ids.iter().enumerate().skip(1).step_by(2) {
            assert!(segments.body(slots.get(*id).location).iter().all(|b| *b == i as u8));
        }
        assert_eq!(segments.segment(0).used, segments.live_bytes());
    }

    #[test]
    fn a_segment_is_released_by_moving_its_records_into_room_made_elsewhere() {
        let (mut segments, mut slots) = (Segments::new(), Slots::new());
        let ids: Vec<u32> = (0..300u32).map(|i| add(&mut segments, &mut slots, 10_000, i as u8)).collect();
        assert_eq!(segments.allocated, 3);
        // Nothing dead anywhere: no segment can go.
        assert!(!segments.release_one(&mut slots));
        // Free most of the first segment and some of the second.
        for id in ids[..80].iter().chain(&ids[110..140]) {
            remove(&mut segments, &mut slots, *id);
        }
        let before = segments.live_bytes();
        assert!(segments.release_one(&mut slots));
        assert_eq!(segments.allocated, 2);
        assert_eq!(segments.live_bytes(), before);
        for (i, id) in ids.iter().enumerate().filter(|(i, _)| !(*i < 80 || (110..140).contains(i))) {
            assert!(segments.body(slots.get(*id).location).iter().all(|b| *b == i as u8), "record {i}");
        }
    }
}
