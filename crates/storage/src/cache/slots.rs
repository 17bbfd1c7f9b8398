//! The row cache's slots: one small fixed record per cached partition (its
//! table, token, where its bytes are) threaded on the shard's LRU list.
//!
//! Slots live in fixed chunks, never reallocated: a growing cache never
//! copies its slot array (a multi-millisecond stall at a few million
//! entries), and a slot's index never changes, so the hash index and the
//! segments refer to slots by a `u32`. Freed slots are reused before new
//! ones are made.
//!
//! Invariants: a slot is on the LRU list iff it is in use; the list runs
//! from the most recently used (`head`) to the least (`tail`).

/// No slot (list ends, free-list end).
pub(crate) const NIL: u32 = u32::MAX;

const CHUNK_SLOTS: usize = 4096;

/// Where a partition's bytes are: segment and offset of its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Location {
    pub segment: u32,
    pub offset: u32,
}

impl Location {
    /// A slot's location before its record is placed: matches no record.
    pub(crate) const NOWHERE: Location = Location { segment: NIL, offset: NIL };
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    pub token: i64,
    /// The cache's id of the table; `FREE` for a slot not in use.
    pub table: u32,
    pub location: Location,
    prev: u32,
    next: u32,
    /// Not on the LRU list: never evicted (an `in_memory` table's).
    pinned: bool,
}

pub(crate) const FREE: u32 = u32::MAX;

const EMPTY: Slot =
    Slot { token: 0, table: FREE, location: Location { segment: 0, offset: 0 }, prev: NIL, next: NIL, pinned: false };

#[derive(Default)]
pub(crate) struct Slots {
    chunks: Vec<Box<[Slot; CHUNK_SLOTS]>>,
    /// Slots ever handed out (the next new one's index).
    made: u32,
    /// Freed slots, linked through `next`.
    free_head: u32,
    in_use: usize,
    head: u32,
    tail: u32,
}

impl Slots {
    pub(crate) fn new() -> Slots {
        Slots { free_head: NIL, head: NIL, tail: NIL, ..Slots::default() }
    }

    pub(crate) fn get(&self, id: u32) -> &Slot {
        let i = id as usize;
        &self.chunks[i / CHUNK_SLOTS][i % CHUNK_SLOTS]
    }

    fn get_mut(&mut self, id: u32) -> &mut Slot {
        let i = id as usize;
        &mut self.chunks[i / CHUNK_SLOTS][i % CHUNK_SLOTS]
    }

    pub(crate) fn set_location(&mut self, id: u32, location: Location) {
        self.get_mut(id).location = location;
    }

    /// A slot for a new entry, at the head of the LRU list unless pinned.
    pub(crate) fn allocate(&mut self, table: u32, token: i64, location: Location, pinned: bool) -> u32 {
        assert_ne!(table, FREE);
        let id = if self.free_head != NIL {
            let id = self.free_head;
            self.free_head = self.get(id).next;
            id
        } else {
            let id = self.made;
            assert!(id < NIL, "row cache slots exhausted");
            if (id as usize).is_multiple_of(CHUNK_SLOTS) {
                self.chunks.push(Box::new([EMPTY; CHUNK_SLOTS]));
            }
            self.made += 1;
            id
        };
        *self.get_mut(id) = Slot { token, table, location, prev: NIL, next: NIL, pinned };
        if !pinned {
            self.push_front(id);
        }
        self.in_use += 1;
        id
    }

    pub(crate) fn free(&mut self, id: u32) {
        assert_ne!(self.get(id).table, FREE, "slot {id} freed twice");
        if !self.get(id).pinned {
            self.unlink(id);
        }
        let free_head = self.free_head;
        *self.get_mut(id) = Slot { next: free_head, ..EMPTY };
        self.free_head = id;
        self.in_use -= 1;
    }

    /// Marks `id` the most recently used.
    pub(crate) fn touch(&mut self, id: u32) {
        if self.head != id && !self.get(id).pinned {
            self.unlink(id);
            self.push_front(id);
        }
    }

    /// Takes `id` off the LRU list (`pinned`) or puts it back at its head.
    pub(crate) fn set_pinned(&mut self, id: u32, pinned: bool) {
        if self.get(id).pinned == pinned {
            return;
        }
        if pinned {
            self.unlink(id);
        } else {
            self.push_front(id);
        }
        self.get_mut(id).pinned = pinned;
    }

    /// The least recently used slot.
    pub(crate) fn lru(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// Slots in use from the most recently used on.
    pub(crate) fn most_recent_first(&self) -> impl Iterator<Item = u32> + '_ {
        std::iter::successors((self.head != NIL).then_some(self.head), |id| {
            let next = self.get(*id).next;
            (next != NIL).then_some(next)
        })
    }

    pub(crate) fn in_use(&self) -> usize {
        self.in_use
    }

    /// Every slot in use, of any table (for dropping a table's entries).
    pub(crate) fn ids_in_use(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.made).filter(|id| self.get(*id).table != FREE)
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.chunks.len() * std::mem::size_of::<[Slot; CHUNK_SLOTS]>()
    }

    fn unlink(&mut self, id: u32) {
        let Slot { prev, next, .. } = *self.get(id);
        match prev {
            NIL => self.head = next,
            p => self.get_mut(p).next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.get_mut(n).prev = prev,
        }
    }

    fn push_front(&mut self, id: u32) {
        let head = self.head;
        let slot = self.get_mut(id);
        slot.prev = NIL;
        slot.next = head;
        match head {
            NIL => self.tail = id,
            h => self.get_mut(h).prev = id,
        }
        self.head = id;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: Location = Location { segment: 0, offset: 0 };

    #[test]
    fn least_recently_used_comes_out_first_and_freed_slots_are_reused() {
        let mut slots = Slots::new();
        let ids: Vec<u32> = (0..5).map(|i| slots.allocate(1, i, AT, false)).collect();
        assert_eq!(slots.lru(), Some(ids[0]));
        slots.touch(ids[0]);
        assert_eq!(slots.lru(), Some(ids[1]));
        slots.free(ids[1]);
        assert_eq!(slots.lru(), Some(ids[2]));
        let reused = slots.allocate(2, 9, AT, false);
        assert_eq!(reused, ids[1]);
        assert_eq!(slots.in_use(), 5);
        let order: Vec<u32> = std::iter::from_fn(|| {
            let id = slots.lru()?;
            slots.free(id);
            Some(id)
        })
        .collect();
        assert_eq!(order, vec![ids[2], ids[3], ids[4], ids[0], reused]);
        assert_eq!(slots.in_use(), 0);
    }

    #[test]
    fn slots_span_chunks() {
        let mut slots = Slots::new();
        for i in 0..(CHUNK_SLOTS as i64 + 10) {
            slots.allocate(1, i, AT, false);
        }
        assert_eq!(slots.memory_bytes(), 2 * std::mem::size_of::<[Slot; CHUNK_SLOTS]>());
        assert_eq!(slots.get(CHUNK_SLOTS as u32 + 3).token, CHUNK_SLOTS as i64 + 3);
    }
}
