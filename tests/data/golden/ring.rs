//! A fixed-size ring buffer.

use std::fmt;

/// A ring buffer that overwrites its oldest element when full.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    items: Vec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T: Clone> Ring<T> {
    /// A ring with room for `capacity` elements.
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0, "capacity must be positive");
        Ring { items: vec![None; capacity], head: 0, len: 0 }
    }

    pub fn push(&mut self, item: T) {
        let capacity = self.items.len();
        let tail = (self.head + self.len) % capacity;
        self.items[tail] = Some(item);
        if self.len == capacity {
            self.head = (self.head + 1) % capacity;
        } else {
            self.len += 1;
        }
    }

    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let item = self.items[self.head].take();
        self.head = (self.head + 1) % self.items.len();
        self.len -= 1;
        item
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

impl<T: fmt::Display + Clone> fmt::Display for Ring<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for i in 0..self.len {
            let index = (self.head + i) % self.items.len();
            if let Some(item) = &self.items[index] {
                write!(f, "{}{}", if i > 0 { ", " } else { "" }, item)?;
            }
        }
        write!(f, "]")
    }
}
