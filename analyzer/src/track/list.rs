//! An intrusive doubly linked list through a slab: the entries are the slab's (indices, no
//! pointers), each carrying its [`Links`]; the list holds the head and the tail. Pushing,
//! unlinking and finding the oldest are O(1) and allocate nothing. The flow table (flows
//! with an open transmission), the I/O tracker (live I/Os, oldest first) and the bounded
//! maps (entries in insertion order) keep their order this way.

/// No entry.
pub const NONE: u32 = u32::MAX;

/// An entry's place in a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Links {
    prev: u32,
    next: u32,
}

impl Default for Links {
    fn default() -> Self {
        Self { prev: NONE, next: NONE }
    }
}

/// A slab entry that can be in a list.
pub trait Linked {
    fn links(&mut self) -> &mut Links;
}

/// Head (oldest) and tail (newest) of a list through a slab of `T`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct List {
    head: u32,
    tail: u32,
}

impl Default for List {
    fn default() -> Self {
        Self { head: NONE, tail: NONE }
    }
}

impl List {
    /// The oldest entry.
    #[inline]
    pub fn head(&self) -> Option<u32> {
        (self.head != NONE).then_some(self.head)
    }

    /// The newest entry.
    #[inline]
    pub fn tail(&self) -> Option<u32> {
        (self.tail != NONE).then_some(self.tail)
    }

    /// Appends entry `i` (not in the list) as the newest.
    pub fn push_tail<T: Linked>(&mut self, slab: &mut [T], i: u32) {
        *slab[i as usize].links() = Links { prev: self.tail, next: NONE };
        match self.tail {
            NONE => self.head = i,
            t => slab[t as usize].links().next = i,
        }
        self.tail = i;
    }

    /// Takes entry `i` (in the list) out of it.
    pub fn unlink<T: Linked>(&mut self, slab: &mut [T], i: u32) {
        let Links { prev, next } = *slab[i as usize].links();
        match prev {
            NONE => self.head = next,
            p => slab[p as usize].links().next = next,
        }
        match next {
            NONE => self.tail = prev,
            n => slab[n as usize].links().prev = prev,
        }
        *slab[i as usize].links() = Links::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct E(Links);
    impl Linked for E {
        fn links(&mut self) -> &mut Links {
            &mut self.0
        }
    }

    fn order(l: &List, slab: &mut [E]) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i = l.head;
        while i != NONE {
            out.push(i);
            i = slab[i as usize].links().next;
        }
        out
    }

    #[test]
    fn keeps_the_order_things_were_pushed_in() {
        let mut slab: Vec<E> = (0..5).map(|_| E(Links::default())).collect();
        let mut l = List::default();
        for i in [3, 0, 4, 1] {
            l.push_tail(&mut slab, i);
        }
        assert_eq!(order(&l, &mut slab), [3, 0, 4, 1]);
        l.unlink(&mut slab, 0); // middle
        l.unlink(&mut slab, 3); // head
        l.unlink(&mut slab, 1); // tail
        assert_eq!((order(&l, &mut slab), l.head()), (vec![4], Some(4)));
        l.push_tail(&mut slab, 3);
        l.unlink(&mut slab, 4);
        l.unlink(&mut slab, 3);
        assert_eq!((l.head(), l), (None, List::default()));
    }
}
